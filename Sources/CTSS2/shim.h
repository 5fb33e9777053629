// tpm2-tss (Debian's libtss2-dev): the Enhanced System API, the TCTI loader, response-code decoding and the
// library's own marshaling of TPM2B structures (so the sealed blobs are stored in the TPM's own encoding).
#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_tctildr.h>
