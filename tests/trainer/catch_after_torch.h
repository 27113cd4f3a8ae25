// Catch2 for test files that include torch: torch pulls in glog, whose CHECK
// would replace Catch's. Include this after torch's headers. The #undef runs
// only before Catch2's first inclusion in a translation unit, so a unity
// build that puts several test files in one keeps Catch's CHECK for all.
#pragma once

#ifndef TWOBLUECUBES_SINGLE_INCLUDE_CATCH_HPP_INCLUDED
#undef CHECK
#endif
#include <catch2/catch.hpp>
