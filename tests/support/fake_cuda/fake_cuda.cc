// A stand-in for libcuda.so.1 on hosts without a GPU, for tests only: kprofd's CUDA path —
// the worker per GPU, module loading with its JIT log, device memory, launches checked and
// run, the event timer, a kernel fault poisoning the context — runs end to end against it.
//
// "Device memory" is host memory, and the three test kernels of tests/modules/vector_add_cuda.cu
// run on the host: vadd adds, spin_ns waits, fault poisons the context the way an illegal
// address does (every later call fails with CUDA_ERROR_ILLEGAL_ADDRESS). Launches on a capturing
// stream are recorded into a graph, which cuGraphLaunch runs again. PTX containing the word
// "bogus" fails to "compile", with a log. A stream created non-blocking keeps its launches
// until something waits for the whole device or that stream (cuCtxSynchronize,
// cuStreamSynchronize, cuMemFree): a copy back on the default stream does not wait for them, as
// on a GPU, where they run some time after the launch. Entry points are handed out only through
// cuGetProcAddress_v2, as kprofd asks for them.
#include <cuda.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

std::atomic<int> sticky{CUDA_SUCCESS};
std::atomic<bool> initialised{false};

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int Count() {
  const char* env = std::getenv("KPROF_FAKE_CUDA_DEVICES");
  return env != nullptr ? std::atoi(env) : 1;
}

CUresult Sticky() { return static_cast<CUresult>(sticky.load()); }

struct Module {
  std::string image;
};
struct Function {
  std::string name;
};
struct Event {
  int64_t nanos = 0;
};

// The bytes of an image the driver is given by pointer alone: the ELF's extent from its
// section headers, the fatbin's from its header, PTX up to its NUL.
std::string ImageBytes(const void* image) {
  const auto* p = static_cast<const unsigned char*>(image);
  if (std::memcmp(p,
                  "\x7f"
                  "ELF",
                  4) == 0) {
    uint64_t shoff = 0;
    uint16_t shentsize = 0, shnum = 0;
    std::memcpy(&shoff, p + 0x28, 8);
    std::memcpy(&shentsize, p + 0x3a, 2);
    std::memcpy(&shnum, p + 0x3c, 2);
    return std::string(reinterpret_cast<const char*>(p), shoff + uint64_t{shentsize} * shnum);
  }
  uint32_t magic = 0;
  std::memcpy(&magic, p, 4);
  if (magic == 0xBA55ED50u) {
    uint16_t header = 0;
    uint64_t size = 0;
    std::memcpy(&header, p + 6, 2);
    std::memcpy(&size, p + 8, 8);
    return std::string(reinterpret_cast<const char*>(p), header + size);
  }
  return std::string(static_cast<const char*>(image));
}

// The real driver starts threads of its own, at init and later as it sees fit, named
// "cuda-EvtHandlr", "cuda00001400006": so does this one, so that a worker's count of threads a
// job left running is tested against them.
void StartDriverThread(const char* name) {
  std::thread([name] {
    pthread_setname_np(pthread_self(), name);
    while (true) pause();
  }).detach();
}

CUresult Init(unsigned) {
  // A driver that never answers, as with a GPU fallen off the bus.
  if (std::getenv("KPROF_FAKE_CUDA_HANG_INIT") != nullptr) {
    while (true) pause();
  }
  if (!initialised.exchange(true)) StartDriverThread("cuda-EvtHandlr");
  return CUDA_SUCCESS;
}
CUresult DriverGetVersion(int* version) {
  *version = 12040;
  return CUDA_SUCCESS;
}
CUresult DeviceGetCount(int* count) {
  if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
  *count = Count();
  return CUDA_SUCCESS;
}
CUresult DeviceGet(CUdevice* device, int ordinal) {
  if (ordinal < 0 || ordinal >= Count()) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}
CUresult DeviceGetName(char* name, int length, CUdevice device) {
  std::snprintf(name, static_cast<size_t>(length), "kprof fake GPU %d", device);
  return CUDA_SUCCESS;
}
CUresult DeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice) {
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *value = 8;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *value = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *value = 4;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *value = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
      *value = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
      *value = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
      *value = 64;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      *value = 2147483647;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
      *value = 65535;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
      *value = 65535;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      *value = 99 << 10;
      break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      *value = 4 << 20;
      break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
      *value = 1410000;
      break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
      *value = 1215000;
      break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
      *value = 5120;
      break;
    default:
      *value = 0;
      break;
  }
  return CUDA_SUCCESS;
}
CUresult DeviceTotalMem(size_t* bytes, CUdevice) {
  *bytes = size_t{8} << 30;
  return CUDA_SUCCESS;
}
CUresult GetErrorName(CUresult error, const char** name) {
  static const std::map<int, const char*> names = {
      {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
      {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
      {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"},
      {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"},
      {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX"},
      {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE"},
      {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND"},
      {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS"}};
  const auto it = names.find(error);
  if (it == names.end()) return CUDA_ERROR_INVALID_VALUE;
  *name = it->second;
  return CUDA_SUCCESS;
}
CUresult GetErrorString(CUresult error, const char** text) {
  if (error == CUDA_ERROR_ILLEGAL_ADDRESS) {
    *text = "an illegal memory access was encountered";
    return CUDA_SUCCESS;
  }
  return GetErrorName(error, text);
}
CUresult DeviceGetPCIBusId(char* bus, int length, CUdevice device) {
  std::snprintf(bus, static_cast<size_t>(length), "0000:%02x:00.0", 0x41 + device);
  return CUDA_SUCCESS;
}
CUresult DevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  static int contexts[64];
  *context = reinterpret_cast<CUcontext>(&contexts[device & 63]);
  return CUDA_SUCCESS;
}
CUresult DevicePrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
thread_local CUcontext current_context = nullptr;
CUresult CtxSetCurrent(CUcontext context) {
  current_context = context;
  return CUDA_SUCCESS;
}
CUresult CtxGetCurrent(CUcontext* context) {
  *context = current_context;
  return CUDA_SUCCESS;
}
// The launches on non-blocking streams not yet run, and those streams.
std::mutex side_mutex;
std::vector<std::function<void()>> side_launches;
std::vector<CUstream> side_streams;

bool IsSideStream(CUstream stream) {
  const std::lock_guard<std::mutex> lock(side_mutex);
  return std::find(side_streams.begin(), side_streams.end(), stream) != side_streams.end();
}

// Runs what non-blocking streams hold: their work is done once something waits for it.
void RunSideLaunches() {
  std::vector<std::function<void()>> launches;
  {
    const std::lock_guard<std::mutex> lock(side_mutex);
    launches.swap(side_launches);
  }
  for (const auto& launch : launches) launch();
}

CUresult CtxSynchronize() {
  RunSideLaunches();
  return Sticky();
}
CUresult StreamCreate(CUstream* stream, unsigned flags) {
  static int streams;
  if ((flags & CU_STREAM_NON_BLOCKING) == 0) {
    *stream = reinterpret_cast<CUstream>(&streams);
    return Sticky();
  }
  *stream = reinterpret_cast<CUstream>(new int());  // lives as long as the process
  const std::lock_guard<std::mutex> lock(side_mutex);
  side_streams.push_back(*stream);
  return Sticky();
}
CUresult StreamSynchronize(CUstream stream) {
  if (IsSideStream(stream)) RunSideLaunches();
  return Sticky();
}
CUresult MemAlloc(CUdeviceptr* ptr, size_t bytes) {
  if (Sticky() != CUDA_SUCCESS) return Sticky();
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (bytes > (size_t{8} << 30)) return CUDA_ERROR_OUT_OF_MEMORY;
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  *ptr = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
CUresult MemFree(CUdeviceptr ptr) {
  RunSideLaunches();  // cuMemFree waits for the device
  std::free(reinterpret_cast<void*>(ptr));
  return CUDA_SUCCESS;
}
CUresult MemGetInfo(size_t* free, size_t* total) {
  *free = *total = size_t{8} << 30;
  return CUDA_SUCCESS;
}
CUresult MemcpyHtoD(CUdeviceptr dst, const void* src, size_t bytes) {
  if (Sticky() != CUDA_SUCCESS) return Sticky();
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  return CUDA_SUCCESS;
}
CUresult MemcpyDtoH(void* dst, CUdeviceptr src, size_t bytes) {
  if (Sticky() != CUDA_SUCCESS) return Sticky();
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return CUDA_SUCCESS;
}
CUresult MemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  if (Sticky() != CUDA_SUCCESS) return Sticky();
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  return CUDA_SUCCESS;
}
CUresult MemsetD8(CUdeviceptr dst, unsigned char value, size_t bytes) {
  if (Sticky() != CUDA_SUCCESS) return Sticky();
  std::memset(reinterpret_cast<void*>(dst), value, bytes);
  return CUDA_SUCCESS;
}
CUresult EventCreate(CUevent* event, unsigned) {
  *event = reinterpret_cast<CUevent>(new Event());
  return CUDA_SUCCESS;
}
CUresult EventDestroy(CUevent event) {
  delete reinterpret_cast<Event*>(event);
  return CUDA_SUCCESS;
}
CUresult EventRecord(CUevent event, CUstream) {
  reinterpret_cast<Event*>(event)->nanos = NowNanos();
  return Sticky();
}
CUresult EventSynchronize(CUevent) { return Sticky(); }
CUresult EventElapsedTime(float* ms, CUevent start, CUevent end) {
  if (Sticky() != CUDA_SUCCESS) return Sticky();
  *ms = static_cast<float>(static_cast<double>(reinterpret_cast<Event*>(end)->nanos -
                                               reinterpret_cast<Event*>(start)->nanos) /
                           1e6);
  return CUDA_SUCCESS;
}
CUresult ModuleLoadDataEx(CUmodule* module, const void* image, unsigned count,
                          CUjit_option* options, void** values) {
  if (Sticky() != CUDA_SUCCESS) return Sticky();
  std::string bytes = ImageBytes(image);
  if (bytes.find("bogus") != std::string::npos) {
    for (unsigned i = 0; i < count; ++i) {
      if (options[i] != CU_JIT_ERROR_LOG_BUFFER) continue;
      size_t size = 0;
      for (unsigned j = 0; j < count; ++j) {
        if (options[j] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
          size = reinterpret_cast<size_t>(values[j]);
        }
      }
      std::snprintf(static_cast<char*>(values[i]), size,
                    "ptxas application ptx input, line 7; error   : Unknown instruction "
                    "'bogus'\nptxas fatal   : Ptx assembly aborted due to errors\n");
    }
    return CUDA_ERROR_INVALID_PTX;
  }
  static std::once_flag jit_thread;
  std::call_once(jit_thread, [] { StartDriverThread("cuda00001400006"); });
  *module = reinterpret_cast<CUmodule>(new Module{std::move(bytes)});
  return CUDA_SUCCESS;
}
CUresult ModuleUnload(CUmodule module) {
  delete reinterpret_cast<Module*>(module);
  return CUDA_SUCCESS;
}
CUresult ModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  const std::string_view wanted(name);
  const bool known = wanted == "vadd" || wanted == "spin_ns" || wanted == "fault";
  if (!known || reinterpret_cast<Module*>(module)->image.find(name) == std::string::npos) {
    return CUDA_ERROR_NOT_FOUND;
  }
  *function = reinterpret_cast<CUfunction>(new Function{name});  // lives as long as the test
  return CUDA_SUCCESS;
}
CUresult FuncGetAttribute(int* value, CUfunction_attribute attribute, CUfunction) {
  *value = attribute == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 0;
  return CUDA_SUCCESS;
}
CUresult FuncSetAttribute(CUfunction, CUfunction_attribute, int) { return CUDA_SUCCESS; }
CUresult FuncGetParamInfo(CUfunction function, size_t index, size_t* offset, size_t* size) {
  const std::string& name = reinterpret_cast<Function*>(function)->name;
  static const auto* const kParameters = new std::map<std::string, std::vector<size_t>>{
      {"vadd", {8, 8, 8, 4}}, {"spin_ns", {8}}, {"fault", {8}}};
  const std::vector<size_t>& sizes = kParameters->at(name);
  if (index >= sizes.size()) return CUDA_ERROR_INVALID_VALUE;
  *offset = 0;
  for (size_t i = 0; i < index; ++i) *offset += sizes[i];
  *size = sizes[index];
  return CUDA_SUCCESS;
}
// A graph: the launches captured on a stream, each with its parameters' values as they were.
struct Graph {
  std::vector<std::function<void()>> launches;
};
std::mutex graph_mutex;
Graph* capturing = nullptr;  // the graph a stream is capturing into (one stream per worker)

CUresult LaunchKernel(CUfunction function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                      unsigned by, unsigned bz, unsigned, CUstream stream, void** params, void**) {
  if (Sticky() != CUDA_SUCCESS) return Sticky();
  if (gx * gy * gz == 0 || bx * by * bz == 0 || bx * by * bz > 1024) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const std::string& name = reinterpret_cast<Function*>(function)->name;
  std::function<void()> run = [] {};
  if (name == "vadd") {
    float* c = *static_cast<float**>(params[0]);
    const float* a = *static_cast<float**>(params[1]);
    const float* b = *static_cast<float**>(params[2]);
    const int n = *static_cast<int*>(params[3]);
    const uint64_t threads = uint64_t{gx} * bx;
    run = [=] {
      for (uint64_t i = 0; i < threads && i < static_cast<uint64_t>(n); ++i) c[i] = a[i] + b[i];
    };
  } else if (name == "spin_ns") {
    const long long ns = *static_cast<long long*>(params[0]);  // NOLINT(google-runtime-int)
    run = [ns] {
      const int64_t until = NowNanos() + ns;
      while (NowNanos() < until) {
      }
    };
  } else if (name == "fault") {
    // Surfaces at the next call, as a real fault does.
    run = [] { sticky = CUDA_ERROR_ILLEGAL_ADDRESS; };
  }
  {
    const std::lock_guard<std::mutex> lock(graph_mutex);
    if (capturing != nullptr) {
      capturing->launches.push_back(std::move(run));  // recorded, not run
      return CUDA_SUCCESS;
    }
  }
  if (IsSideStream(stream)) {
    const std::lock_guard<std::mutex> lock(side_mutex);
    side_launches.push_back(std::move(run));  // run when something waits for it
    return CUDA_SUCCESS;
  }
  run();
  return CUDA_SUCCESS;
}

CUresult StreamBeginCapture(CUstream, CUstreamCaptureMode) {
  if (Sticky() != CUDA_SUCCESS) return Sticky();
  const std::lock_guard<std::mutex> lock(graph_mutex);
  if (capturing != nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  capturing = new Graph();
  return CUDA_SUCCESS;
}
CUresult StreamEndCapture(CUstream, CUgraph* graph) {
  const std::lock_guard<std::mutex> lock(graph_mutex);
  if (capturing == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  *graph = reinterpret_cast<CUgraph>(capturing);
  capturing = nullptr;
  return CUDA_SUCCESS;
}
CUresult GraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                   unsigned long long) {  // NOLINT
  if (Sticky() != CUDA_SUCCESS) return Sticky();
  *exec = reinterpret_cast<CUgraphExec>(new Graph(*reinterpret_cast<Graph*>(graph)));
  return CUDA_SUCCESS;
}
CUresult GraphLaunch(CUgraphExec exec, CUstream) {
  if (Sticky() != CUDA_SUCCESS) return Sticky();
  for (const auto& launch : reinterpret_cast<Graph*>(exec)->launches) launch();
  return CUDA_SUCCESS;
}
CUresult GraphExecDestroy(CUgraphExec exec) {
  delete reinterpret_cast<Graph*>(exec);
  return CUDA_SUCCESS;
}
CUresult GraphDestroy(CUgraph graph) {
  delete reinterpret_cast<Graph*>(graph);
  return CUDA_SUCCESS;
}

const std::map<std::string_view, void*>& EntryPoints() {
  static const auto* const table = new std::map<std::string_view, void*>{
      {"cuInit", reinterpret_cast<void*>(&Init)},
      {"cuDriverGetVersion", reinterpret_cast<void*>(&DriverGetVersion)},
      {"cuDeviceGetCount", reinterpret_cast<void*>(&DeviceGetCount)},
      {"cuDeviceGet", reinterpret_cast<void*>(&DeviceGet)},
      {"cuDeviceGetName", reinterpret_cast<void*>(&DeviceGetName)},
      {"cuDeviceGetAttribute", reinterpret_cast<void*>(&DeviceGetAttribute)},
      {"cuDeviceTotalMem", reinterpret_cast<void*>(&DeviceTotalMem)},
      {"cuGetErrorName", reinterpret_cast<void*>(&GetErrorName)},
      {"cuGetErrorString", reinterpret_cast<void*>(&GetErrorString)},
      {"cuDeviceGetPCIBusId", reinterpret_cast<void*>(&DeviceGetPCIBusId)},
      {"cuDevicePrimaryCtxRetain", reinterpret_cast<void*>(&DevicePrimaryCtxRetain)},
      {"cuDevicePrimaryCtxRelease", reinterpret_cast<void*>(&DevicePrimaryCtxRelease)},
      {"cuCtxSetCurrent", reinterpret_cast<void*>(&CtxSetCurrent)},
      {"cuCtxGetCurrent", reinterpret_cast<void*>(&CtxGetCurrent)},
      {"cuCtxSynchronize", reinterpret_cast<void*>(&CtxSynchronize)},
      {"cuStreamCreate", reinterpret_cast<void*>(&StreamCreate)},
      {"cuStreamSynchronize", reinterpret_cast<void*>(&StreamSynchronize)},
      {"cuMemAlloc", reinterpret_cast<void*>(&MemAlloc)},
      {"cuMemFree", reinterpret_cast<void*>(&MemFree)},
      {"cuMemGetInfo", reinterpret_cast<void*>(&MemGetInfo)},
      {"cuMemcpyHtoD", reinterpret_cast<void*>(&MemcpyHtoD)},
      {"cuMemcpyDtoH", reinterpret_cast<void*>(&MemcpyDtoH)},
      {"cuMemcpyDtoD", reinterpret_cast<void*>(&MemcpyDtoD)},
      {"cuMemsetD8", reinterpret_cast<void*>(&MemsetD8)},
      {"cuEventCreate", reinterpret_cast<void*>(&EventCreate)},
      {"cuEventDestroy", reinterpret_cast<void*>(&EventDestroy)},
      {"cuEventRecord", reinterpret_cast<void*>(&EventRecord)},
      {"cuEventSynchronize", reinterpret_cast<void*>(&EventSynchronize)},
      {"cuEventElapsedTime", reinterpret_cast<void*>(&EventElapsedTime)},
      {"cuModuleLoadDataEx", reinterpret_cast<void*>(&ModuleLoadDataEx)},
      {"cuModuleUnload", reinterpret_cast<void*>(&ModuleUnload)},
      {"cuModuleGetFunction", reinterpret_cast<void*>(&ModuleGetFunction)},
      {"cuFuncGetAttribute", reinterpret_cast<void*>(&FuncGetAttribute)},
      {"cuFuncSetAttribute", reinterpret_cast<void*>(&FuncSetAttribute)},
      {"cuLaunchKernel", reinterpret_cast<void*>(&LaunchKernel)},
      {"cuFuncGetParamInfo", reinterpret_cast<void*>(&FuncGetParamInfo)},
      {"cuStreamBeginCapture", reinterpret_cast<void*>(&StreamBeginCapture)},
      {"cuStreamEndCapture", reinterpret_cast<void*>(&StreamEndCapture)},
      {"cuGraphInstantiateWithFlags", reinterpret_cast<void*>(&GraphInstantiateWithFlags)},
      {"cuGraphLaunch", reinterpret_cast<void*>(&GraphLaunch)},
      {"cuGraphExecDestroy", reinterpret_cast<void*>(&GraphExecDestroy)},
      {"cuGraphDestroy", reinterpret_cast<void*>(&GraphDestroy)},
  };
  return *table;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(
    const char* symbol, void** pfn, int, cuuint64_t, CUdriverProcAddressQueryResult* status) {
  const auto it = EntryPoints().find(symbol);
  if (it == EntryPoints().end()) {
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  *pfn = it->second;
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}
