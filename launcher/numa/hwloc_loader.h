// hwloc, loaded at run time. ctrun needs only libc and libm at start-up (a
// pip wheel allows nothing else, and every shared library costs each start
// its loading), and Debian's static libhwloc.a needs libudev.so; so
// libhwloc.so.15 is opened with dlopen the first time --numa-binding (or a
// test) reads a topology, never otherwise.
//
// Include this header instead of <hwloc.h>: it renames every exported hwloc
// function the numa/ code and hwloc's inline helpers (hwloc/helper.h,
// hwloc/inlines.h) call to ctrun_hwloc_<name>, then includes <hwloc.h>, which
// declares the renamed functions. hwloc_loader.cc defines each as a
// trampoline to the real function in the loaded library. Calling one before
// LoadHwloc() succeeded is a bug (aborts). Using an hwloc function missing
// from the list below fails at link time (undefined ctrun_hwloc_<name>): add
// it here and in hwloc_loader.cc.
#pragma once

#ifdef HWLOC_H
#error "include launcher/numa/hwloc_loader.h before (instead of) <hwloc.h>"
#endif

#define hwloc_get_api_version ctrun_hwloc_get_api_version
#define hwloc_topology_init ctrun_hwloc_topology_init
#define hwloc_topology_destroy ctrun_hwloc_topology_destroy
#define hwloc_topology_load ctrun_hwloc_topology_load
#define hwloc_topology_set_io_types_filter ctrun_hwloc_topology_set_io_types_filter
#define hwloc_topology_set_type_filter ctrun_hwloc_topology_set_type_filter
#define hwloc_topology_set_xml ctrun_hwloc_topology_set_xml
#define hwloc_topology_set_synthetic ctrun_hwloc_topology_set_synthetic
#define hwloc_topology_get_allowed_cpuset ctrun_hwloc_topology_get_allowed_cpuset
#define hwloc_topology_is_thissystem ctrun_hwloc_topology_is_thissystem
#define hwloc_get_type_depth ctrun_hwloc_get_type_depth
#define hwloc_get_nbobjs_by_depth ctrun_hwloc_get_nbobjs_by_depth
#define hwloc_get_obj_by_depth ctrun_hwloc_get_obj_by_depth
#define hwloc_obj_type_is_dcache ctrun_hwloc_obj_type_is_dcache
#define hwloc_bitmap_free ctrun_hwloc_bitmap_free
#define hwloc_bitmap_first ctrun_hwloc_bitmap_first
#define hwloc_bitmap_next ctrun_hwloc_bitmap_next
#define hwloc_bitmap_weight ctrun_hwloc_bitmap_weight

#include <hwloc.h>

#include <string>

#include "base/status.h"

namespace ctrun::launcher {

// hwloc's library as ctrun loads it: hwloc 2.x's ABI.
inline constexpr const char kHwlocLibrary[] = "libhwloc.so.15";

// Opens kHwlocLibrary once (RTLD_NOW | RTLD_LOCAL, never closed) and finds
// every function above in it; later calls return the first outcome.
// Thread-safe. FailedPrecondition naming the library, the package to
// install and the reason (last) when it cannot be opened, lacks a function,
// or is an hwloc whose major API version differs from the headers'.
Status LoadHwloc();

// What LoadHwloc does, for `library` and without keeping it: whether it
// could serve as hwloc, and if not, LoadHwloc's message for it. For tests
// of the failure messages (a library that is absent, or not hwloc).
Status ProbeHwlocLibrary(const std::string& library);

}  // namespace ctrun::launcher
