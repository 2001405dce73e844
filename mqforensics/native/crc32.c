/* CRC-32 (zlib's), slicing by eight bytes: eight 256-entry tables built on first use. */
#include "crc32.h"

#include <string.h>

static uint32_t tables[8][256];
static int ready;

static void build_tables(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        tables[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = tables[0][n];
        for (int t = 1; t < 8; t++) {
            c = tables[0][c & 0xFF] ^ (c >> 8);
            tables[t][n] = c;
        }
    }
    ready = 1;
}

uint32_t mqf_crc32(uint32_t crc, const uint8_t *buf, size_t len) {
    if (!ready) build_tables();
    uint32_t c = ~crc;
    while (len && ((uintptr_t)buf & 7)) {
        c = tables[0][(c ^ *buf++) & 0xFF] ^ (c >> 8);
        len--;
    }
    while (len >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, buf, 4);
        memcpy(&hi, buf + 4, 4);
        lo ^= c; /* little-endian hosts only: checked by the Python loader */
        c = tables[7][lo & 0xFF] ^ tables[6][(lo >> 8) & 0xFF] ^ tables[5][(lo >> 16) & 0xFF] ^
            tables[4][lo >> 24] ^ tables[3][hi & 0xFF] ^ tables[2][(hi >> 8) & 0xFF] ^
            tables[1][(hi >> 16) & 0xFF] ^ tables[0][hi >> 24];
        buf += 8;
        len -= 8;
    }
    while (len--) c = tables[0][(c ^ *buf++) & 0xFF] ^ (c >> 8);
    return ~c;
}

/* Exported for the loader's self-test and the tests: the same as zlib.crc32(buf, crc). */
uint32_t mqf_crc32_export(uint32_t crc, const uint8_t *buf, size_t len) {
    return mqf_crc32(crc, buf, len);
}
