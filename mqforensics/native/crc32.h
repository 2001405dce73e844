/* CRC-32 as zlib computes it (polynomial 0xEDB88320, reflected, pre- and post-inverted):
 * mqf_crc32(zlib.crc32(a), b) == zlib.crc32(a + b), mqf_crc32(0, ...) starts a new CRC.
 * Twoskip and the log-queue segment format both use it. */
#ifndef MQF_CRC32_H
#define MQF_CRC32_H
#include <stddef.h>
#include <stdint.h>

uint32_t mqf_crc32(uint32_t crc, const uint8_t *buf, size_t len);

#endif
