// Moved: the OLAF wire format sits beside the CAIS and management ones in
// include/inca/wire/. This forwarding header keeps old includes building
// for one release.
#pragma once

#include "inca/wire/olaf.h"  // IWYU pragma: export
