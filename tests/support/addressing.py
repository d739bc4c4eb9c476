"""A stand-in wave for addressing.addresses' tests: the EXEC, width and error naming it reads."""


class AddressWave:
    lanes = 64

    def __init__(self, exec_mask):
        self.exec, self.exec_full, self.width = exec_mask, bool(exec_mask.all()), exec_mask.size

    def check_read(self, v):
        pass

    def error(self, cls, message, lane=None, address=None):
        return cls(f"{message} [lane {lane}, address {address}]")
