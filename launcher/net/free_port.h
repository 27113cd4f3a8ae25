// A TCP port that is free on this host right now.
#pragma once

#include "base/result.h"

namespace ctrun::launcher {

// Binds port 0 on all interfaces, reads the port the kernel chose and closes
// the socket. The port can be taken by someone else before the worker binds
// it (the same race torchrun has, pytorch#85604); the kernel does not hand out
// a just-released ephemeral port again soon. Errors: IOError.
Result<int> FindFreePort();

}  // namespace ctrun::launcher
