#include "launcher/numa/hwloc_loader.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "base/result.h"

// Every function hwloc_loader.h renames, without its hwloc_ prefix.
#define CTRUN_HWLOC_FUNCTIONS(X)                                                           \
  X(get_api_version) X(topology_init) X(topology_destroy) X(topology_load)               \
  X(topology_set_io_types_filter) X(topology_set_type_filter) X(topology_set_xml)        \
  X(topology_set_synthetic) X(topology_get_allowed_cpuset) X(topology_is_thissystem)     \
  X(get_type_depth) X(get_nbobjs_by_depth) X(get_obj_by_depth) X(obj_type_is_dcache)     \
  X(bitmap_free) X(bitmap_first) X(bitmap_next) X(bitmap_weight)

namespace ctrun::launcher {
namespace {

// The real functions, found in the loaded library.
struct Api {
#define CTRUN_HWLOC_FIELD(name) decltype(&::ctrun_hwloc_##name) name = nullptr;
  CTRUN_HWLOC_FUNCTIONS(CTRUN_HWLOC_FIELD)
#undef CTRUN_HWLOC_FIELD
};

// Opens `library` and finds the functions in it; closes it again unless
// `keep`.
Result<Api> Open(const std::string& library, bool keep) {
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    return Status::FailedPrecondition(
        "hwloc's library " + library +
        " cannot be loaded, install it (Debian/Ubuntu: apt-get install libhwloc15): " +
        (why ? why : "no reason given"));
  }
  Api api;
  std::string missing;
#define CTRUN_HWLOC_RESOLVE(name)                                                          \
  api.name = reinterpret_cast<decltype(api.name)>(::dlsym(handle, "hwloc_" #name));        \
  if (api.name == nullptr && missing.empty()) missing = "hwloc_" #name;
  CTRUN_HWLOC_FUNCTIONS(CTRUN_HWLOC_RESOLVE)
#undef CTRUN_HWLOC_RESOLVE
  Status status;
  if (!missing.empty()) {
    status = Status::FailedPrecondition(
        "the library " + library +
        " is not hwloc 2.x, reinstall it (Debian/Ubuntu: apt-get install --reinstall libhwloc15): "
        "it lacks " + missing);
  } else if (const unsigned version = api.get_api_version();
             (version >> 16) != (HWLOC_API_VERSION >> 16)) {
    // hwloc's rule: a different major API version is a different ABI.
    char found[32];
    std::snprintf(found, sizeof(found), "%u.%u", version >> 16, (version >> 8) & 0xff);
    status = Status::FailedPrecondition(
        "hwloc's library " + library + " is not hwloc " + std::to_string(HWLOC_API_VERSION >> 16) +
        ".x, install it (Debian/Ubuntu: apt-get install libhwloc15): it is hwloc " + found);
  }
  if (!status.ok() || !keep) ::dlclose(handle);
  if (!status.ok()) return status;
  return api;
}

const Result<Api>& Loaded() {
  static const Result<Api> loaded = Open(kHwlocLibrary, /*keep=*/true);
  return loaded;
}

const Api& Hwloc() {
  const Result<Api>& loaded = Loaded();
  if (!loaded.ok()) {
    std::fprintf(stderr, "ctrun: bug: an hwloc function was called although %s is not loaded\n",
                 kHwlocLibrary);
    std::abort();
  }
  return *loaded;
}

}  // namespace

Status LoadHwloc() {
  const Result<Api>& loaded = Loaded();
  return loaded.ok() ? Status::Ok() : loaded.status();
}

Status ProbeHwlocLibrary(const std::string& library) {
  Result<Api> api = Open(library, /*keep=*/false);
  return api.ok() ? Status::Ok() : api.status();
}

}  // namespace ctrun::launcher

// The trampolines: the renamed declarations from <hwloc.h>, each calling the
// real function.
using ctrun::launcher::Hwloc;

extern "C" {

unsigned ctrun_hwloc_get_api_version(void) { return Hwloc().get_api_version(); }
int ctrun_hwloc_topology_init(hwloc_topology_t* topologyp) {
  return Hwloc().topology_init(topologyp);
}
void ctrun_hwloc_topology_destroy(hwloc_topology_t topology) {
  Hwloc().topology_destroy(topology);
}
int ctrun_hwloc_topology_load(hwloc_topology_t topology) { return Hwloc().topology_load(topology); }
int ctrun_hwloc_topology_set_io_types_filter(hwloc_topology_t topology,
                                             enum hwloc_type_filter_e filter) {
  return Hwloc().topology_set_io_types_filter(topology, filter);
}
int ctrun_hwloc_topology_set_type_filter(hwloc_topology_t topology, hwloc_obj_type_t type,
                                         enum hwloc_type_filter_e filter) {
  return Hwloc().topology_set_type_filter(topology, type, filter);
}
int ctrun_hwloc_topology_set_xml(hwloc_topology_t topology, const char* xmlpath) {
  return Hwloc().topology_set_xml(topology, xmlpath);
}
int ctrun_hwloc_topology_set_synthetic(hwloc_topology_t topology, const char* description) {
  return Hwloc().topology_set_synthetic(topology, description);
}
hwloc_const_cpuset_t ctrun_hwloc_topology_get_allowed_cpuset(hwloc_topology_t topology) {
  return Hwloc().topology_get_allowed_cpuset(topology);
}
int ctrun_hwloc_topology_is_thissystem(hwloc_topology_t topology) {
  return Hwloc().topology_is_thissystem(topology);
}
int ctrun_hwloc_get_type_depth(hwloc_topology_t topology, hwloc_obj_type_t type) {
  return Hwloc().get_type_depth(topology, type);
}
unsigned ctrun_hwloc_get_nbobjs_by_depth(hwloc_topology_t topology, int depth) {
  return Hwloc().get_nbobjs_by_depth(topology, depth);
}
hwloc_obj_t ctrun_hwloc_get_obj_by_depth(hwloc_topology_t topology, int depth, unsigned idx) {
  return Hwloc().get_obj_by_depth(topology, depth, idx);
}
int ctrun_hwloc_obj_type_is_dcache(hwloc_obj_type_t type) {
  return Hwloc().obj_type_is_dcache(type);
}
void ctrun_hwloc_bitmap_free(hwloc_bitmap_t bitmap) { Hwloc().bitmap_free(bitmap); }
int ctrun_hwloc_bitmap_first(hwloc_const_bitmap_t bitmap) { return Hwloc().bitmap_first(bitmap); }
int ctrun_hwloc_bitmap_next(hwloc_const_bitmap_t bitmap, int prev) {
  return Hwloc().bitmap_next(bitmap, prev);
}
int ctrun_hwloc_bitmap_weight(hwloc_const_bitmap_t bitmap) {
  return Hwloc().bitmap_weight(bitmap);
}

}  // extern "C"
