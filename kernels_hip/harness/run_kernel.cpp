// run_kernel: launch one entry point of a HIP twin's code object on a ROCm GPU, inputs and outputs
// as .npy files. gfxsim/hip/harness.py writes the manifest from the kernel's metadata (.args: name,
// offset, size, value_kind), so this program knows no kernel signature.
//
//   run_kernel MANIFEST           run; every buffer argument comes back as <dir>/<name>.out.npy
//   run_kernel --check MANIFEST   no GPU: read the manifest and the .npy files, pack the kernarg
//                                 segment (fake device pointers), print it, write the .out.npy files
//
// Manifest, one item per line:
//   dir PATH               where <name>.npy are read and <name>.out.npy written
//   code_object PATH       a linked code object (ld.lld -shared), as `gfxsim hip build` writes
//   kernel NAME            the entry point
//   grid X Y Z             workgroups per dimension
//   block X                threads per workgroup (1-D)
//   kernarg_size N         .kernarg_segment_size
//   buffer OFFSET NAME     a global_buffer argument: NAME.npy, its device pointer at OFFSET
//   value OFFSET HEX       a by_value argument: its little-endian bytes at OFFSET
//
// Build: HIP_PLATFORM=amd hipcc --offload-arch=gfx90a -O2 -std=c++17 run_kernel.cpp -o run_kernel
// (host code only; --offload-arch keeps hipcc from probing for a GPU).
#include <hip/hip_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

[[noreturn]] void fail(const std::string& msg) { throw std::runtime_error(msg); }

#define HIP_CHECK(call)                                                                       \
  do {                                                                                        \
    hipError_t err_ = (call);                                                                 \
    if (err_ != hipSuccess) fail(std::string(#call) + ": " + hipGetErrorString(err_));        \
  } while (0)

// ---- .npy (format versions 1-3, C order, little-endian or byte-sized) ----------------------
struct Npy {
  std::string header;          // magic, version, length and the header dict, written back unchanged
  std::vector<char> data;
};

size_t npy_bytes(const std::string& dict, const std::string& path) {
  auto field = [&](const char* key) {
    size_t k = dict.find(key);
    if (k == std::string::npos) fail(path + ": .npy header has no " + key);
    return k + std::strlen(key);
  };
  size_t d = dict.find_first_of("'\"", field("'descr':"));
  std::string descr = dict.substr(d + 1, dict.find_first_of("'\"", d + 1) - d - 1);
  if (descr.size() < 3 || descr[0] == '>') fail(path + ": dtype " + descr + " is not little-endian");
  size_t itemsize = std::stoul(descr.substr(2));
  size_t f = field("'fortran_order':");
  if (dict.compare(dict.find_first_not_of(' ', f), 4, "True") == 0) fail(path + ": Fortran order");
  size_t s = dict.find('(', field("'shape':")), e = dict.find(')', s);
  size_t n = 1;
  std::stringstream dims(dict.substr(s + 1, e - s - 1));
  for (std::string tok; std::getline(dims, tok, ',');)
    if (tok.find_first_not_of(' ') != std::string::npos) n *= std::stoul(tok);
  return n * itemsize;
}

Npy read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path + ": cannot open");
  char pre[8];
  if (!in.read(pre, 8) || std::memcmp(pre, "\x93NUMPY", 6) != 0) fail(path + ": not a .npy file");
  const size_t len_bytes = pre[6] == 1 ? 2 : 4;       // header length: u16 in version 1, u32 after
  unsigned char lb[4] = {0, 0, 0, 0};
  in.read((char*)lb, len_bytes);
  const uint32_t len = lb[0] | lb[1] << 8 | lb[2] << 16 | (uint32_t)lb[3] << 24;
  const size_t pre_len = 8 + len_bytes;
  std::string dict(len, '\0');
  if (!in.read(&dict[0], len)) fail(path + ": truncated header");
  Npy npy;
  in.seekg(0);
  npy.header.resize(pre_len + len);
  in.read(&npy.header[0], pre_len + len);
  npy.data.resize(npy_bytes(dict, path));
  if (!in.read(npy.data.data(), npy.data.size())) fail(path + ": fewer data bytes than the header says");
  return npy;
}

void write_npy(const std::string& path, const Npy& npy) {
  std::ofstream out(path, std::ios::binary);
  out.write(npy.header.data(), npy.header.size());
  out.write(npy.data.data(), npy.data.size());
  if (!out) fail(path + ": write failed");
}

// ---- manifest ------------------------------------------------------------------------------
struct Arg {
  size_t offset;
  std::string name;            // buffer name, empty for a value
  std::vector<char> bytes;     // value bytes
};
struct Manifest {
  std::string dir, code_object, kernel;
  unsigned grid[3] = {1, 1, 1}, block = 0;
  size_t kernarg_size = 0;
  std::vector<Arg> args;
};

Manifest read_manifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path + ": cannot open manifest");
  Manifest m;
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    std::istringstream ls(line);
    std::string key;
    if (!(ls >> key)) continue;
    if (key == "dir") ls >> m.dir;
    else if (key == "code_object") ls >> m.code_object;
    else if (key == "kernel") ls >> m.kernel;
    else if (key == "grid") ls >> m.grid[0] >> m.grid[1] >> m.grid[2];
    else if (key == "block") ls >> m.block;
    else if (key == "kernarg_size") ls >> m.kernarg_size;
    else if (key == "buffer" || key == "value") {
      Arg a;
      std::string text;
      ls >> a.offset >> text;
      if (key == "buffer") a.name = text;
      else
        for (size_t i = 0; i + 1 < text.size(); i += 2) a.bytes.push_back((char)std::stoul(text.substr(i, 2), nullptr, 16));
      m.args.push_back(a);
    } else fail(path + ":" + std::to_string(no) + ": unknown item '" + key + "'");
    if (ls.fail()) fail(path + ":" + std::to_string(no) + ": malformed '" + line + "'");
  }
  if (m.dir.empty() || m.code_object.empty() || m.kernel.empty() || m.block == 0)
    fail(path + ": needs dir, code_object, kernel and block");
  return m;
}

void put(std::vector<char>& kernarg, size_t offset, const void* src, size_t n, const std::string& what) {
  if (offset + n > kernarg.size()) fail(what + " at offset " + std::to_string(offset) + " runs past kernarg_size");
  std::memcpy(kernarg.data() + offset, src, n);
}

int run(const Manifest& m, bool check) {
  std::vector<Npy> bufs(m.args.size());
  std::vector<void*> dev(m.args.size(), nullptr);
  std::vector<char> kernarg(m.kernarg_size, 0);
  for (size_t i = 0; i < m.args.size(); ++i)
    if (!m.args[i].name.empty()) bufs[i] = read_npy(m.dir + "/" + m.args[i].name + ".npy");

  hipModule_t module = nullptr;
  hipFunction_t function = nullptr;
  if (!check) {
    int n = 0;
    HIP_CHECK(hipGetDeviceCount(&n));
    hipDeviceProp_t prop;
    HIP_CHECK(hipGetDeviceProperties(&prop, 0));
    std::printf("device 0: %s (%s)\n", prop.name, prop.gcnArchName);
    if (hipModuleLoad(&module, m.code_object.c_str()) != hipSuccess)
      fail("hipModuleLoad(" + m.code_object + ") failed: is it built for " + prop.gcnArchName + "?");
    HIP_CHECK(hipModuleGetFunction(&function, module, m.kernel.c_str()));
  }
  for (size_t i = 0; i < m.args.size(); ++i) {
    const Arg& a = m.args[i];
    if (a.name.empty()) {
      put(kernarg, a.offset, a.bytes.data(), a.bytes.size(), "value");
      continue;
    }
    if (check) {
      dev[i] = (void*)(uintptr_t)(0x100000 * (i + 1));
    } else {
      HIP_CHECK(hipMalloc(&dev[i], bufs[i].data.size() ? bufs[i].data.size() : 1));
      HIP_CHECK(hipMemcpy(dev[i], bufs[i].data.data(), bufs[i].data.size(), hipMemcpyHostToDevice));
    }
    put(kernarg, a.offset, &dev[i], sizeof(void*), "buffer " + a.name);
  }
  if (check) {
    std::printf("%s: grid %u %u %u, block %u, kernarg %zu bytes\n", m.kernel.c_str(), m.grid[0], m.grid[1], m.grid[2],
                m.block, m.kernarg_size);
    for (const Arg& a : m.args)
      std::printf("  %4zu  %s\n", a.offset, a.name.empty() ? ("value, " + std::to_string(a.bytes.size()) + " bytes").c_str()
                                                        : ("buffer " + a.name).c_str());
  } else {
    size_t size = kernarg.size();
    void* extra[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER, kernarg.data(), HIP_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     HIP_LAUNCH_PARAM_END};
    hipEvent_t t0, t1;
    HIP_CHECK(hipEventCreate(&t0));
    HIP_CHECK(hipEventCreate(&t1));
    HIP_CHECK(hipEventRecord(t0, nullptr));
    HIP_CHECK(hipModuleLaunchKernel(function, m.grid[0], m.grid[1], m.grid[2], m.block, 1, 1, 0, nullptr, nullptr,
                                    extra));
    HIP_CHECK(hipEventRecord(t1, nullptr));
    HIP_CHECK(hipDeviceSynchronize());
    float ms = 0;
    HIP_CHECK(hipEventElapsedTime(&ms, t0, t1));
    std::printf("%s: grid %u %u %u, block %u: %.3f ms\n", m.kernel.c_str(), m.grid[0], m.grid[1], m.grid[2], m.block, ms);
  }
  for (size_t i = 0; i < m.args.size(); ++i) {
    if (m.args[i].name.empty()) continue;
    if (!check) {
      HIP_CHECK(hipMemcpy(bufs[i].data.data(), dev[i], bufs[i].data.size(), hipMemcpyDeviceToHost));
      HIP_CHECK(hipFree(dev[i]));
    }
    write_npy(m.dir + "/" + m.args[i].name + ".out.npy", bufs[i]);
  }
  if (module) HIP_CHECK(hipModuleUnload(module));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool check = argc == 3 && std::string(argv[1]) == "--check";
  if (argc != 2 && !check) {
    std::fprintf(stderr, "usage: run_kernel [--check] MANIFEST\n");
    return 2;
  }
  try {
    return run(read_manifest(argv[argc - 1]), check);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "run_kernel: error: %s\n", e.what());
    return 1;
  }
}
