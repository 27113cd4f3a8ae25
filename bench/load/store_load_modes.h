// store_load's two modes (described in store_load.cc): each runs to the
// end, prints its one JSON object on stdout, and returns the exit code
// (0 every reply right, 1 not).
#pragma once

#include "store_load_options.h"

namespace store_load {

// C connections in closed loops over SET+GET, ADD, WAIT, COMPARE_SET.
int Mix(const Options& o);

// N clients at once through an ADD barrier and a WAIT on a release key.
int Storm(const Options& o);

}  // namespace store_load
