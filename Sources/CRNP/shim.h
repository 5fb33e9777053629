// RNP (Debian's librnp-dev): the FFI (ffi objects, keys imported from memory, operations) and its result codes.
#include <rnp/rnp.h>
#include <rnp/rnp_err.h>
