"""binary32 operands for the tests of the f32 division helpers' plain-case shortcuts."""
import numpy as np

SPECIAL = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 1e-40, 3.4e38])


def f32(mant, biased_exp):
    """mant x 2^(biased_exp - 127) as a binary32."""
    return np.float32(np.ldexp(np.float64(mant), int(biased_exp) - 127))


def division_operands(rng, gap_low: int):
    """64 lanes of (s1, s2): signed normal values whose exponents differ by gap_low..99 (about 60%
    of the lanes within 40 of each other in mid range), about 5% of each replaced by a special
    value (zeros, infinities, NaN, denormals, a huge value)."""
    e1 = rng.integers(1, 255, 64)
    e2 = np.clip(e1 + rng.integers(gap_low, 100, 64), 1, 254)
    plain = rng.random(64) < 0.6
    e1[plain] = rng.integers(60, 190, plain.sum())
    e2[plain] = e1[plain] + rng.integers(-40, 40, plain.sum())
    s1 = np.float32([f32(m, e) for m, e in zip(rng.uniform(1, 2, 64) * rng.choice([-1, 1], 64), e1)])
    s2 = np.float32([f32(m, e) for m, e in zip(rng.uniform(1, 2, 64) * rng.choice([-1, 1], 64), e2)])
    for x in (s1, s2):
        hit = rng.random(64) < 0.05
        x[hit] = rng.choice(SPECIAL, hit.sum())
    return s1, s2
