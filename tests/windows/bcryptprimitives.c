/*
 * A test-only stand-in for Windows' bcryptprimitives.dll, for running Rust programs under
 * Debian's Wine 8.0, which lacks that DLL.
 *
 * Why: Rust's standard library imports `ProcessPrng` from bcryptprimitives.dll (the source of
 * HashMap seeds and of every random byte std draws), so under that Wine every Rust .exe fails
 * to start with "Library bcryptprimitives.dll ... not found". Real Windows 10 and later ship the
 * DLL; this file is never part of a release. `.ci/windows` builds it and places it beside the
 * .exe under test:
 *
 *   x86_64-w64-mingw32-gcc -shared -O2 -o bcryptprimitives.dll bcryptprimitives.c -ladvapi32
 *
 * `ProcessPrng` is answered by `RtlGenRandom` (advapi32's SystemFunction036), the system's
 * cryptographic generator, which Wine implements.
 */
#include <windows.h>

/* RtlGenRandom: declared here because its header is guarded by macros mingw does not set. */
BOOLEAN NTAPI SystemFunction036(PVOID buffer, ULONG length);

/* Fills `data` with `len` random bytes; always TRUE on Windows, as documented by Microsoft. */
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG chunk = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!SystemFunction036(data, chunk)) {
            return FALSE;
        }
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
