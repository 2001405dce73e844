/* Twoskip hot loops for twoskip_fast.py: the record scan (lengths, pointers, head and tail
 * CRC-32) into flat arrays, and the level-0 walk in key order. Both stop at the first thing the
 * reference reader (twoskip.py) would report, so the caller can hand the file to it; they
 * never read outside [buf, buf + len). Big-endian fields, as lib/cyrusdb_twoskip.c writes them. */
#include <stdint.h>
#include <string.h>

#include "crc32.h"

#define MAXLEVEL 31
#define EXT_KEY 0x40   /* `type` flag: the key length is a 64-bit field */
#define EXT_VALUE 0x80 /* `type` flag: the value length is a 64-bit field */

/* Type codes stored in `type` (low bits). */
enum { T_DUMMY = 1, T_RECORD = 2, T_DELETE = 3, T_COMMIT = 4 };

enum { OK = 0, ANOMALY = 1, FULL = 2 };

#define NONE UINT64_MAX /* no level-0 successor below the end */

static const uint8_t BLANK[8] = {' ', 'B', 'L', 'A', 'N', 'K', 0x07, 0xa0};

static uint64_t be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return v;
}

static uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static int type_code(uint8_t c) {
    switch (c) {
        case '=': return T_DUMMY;
        case '+': return T_RECORD;
        case '-': return T_DELETE;
        case '$': return T_COMMIT;
        default: return 0;
    }
}

/* Scan records from `start` while they begin below `limit` (<= `end`, the committed end) and
 * fewer than `cap` are written. A record is taken only when the reference would take it without
 * a problem: known type, level <= 31, inside `end`, both CRCs right; BLANK padding is skipped.
 * Writes per record its offset, type code (with EXT_* flags), level, key and value lengths and
 * its level-0 successor: for a DELETE its first pointer, else the slot _getloc picks (the one
 * below `end`, the higher if both are; a level-0 record's second slot counts as `end`), or
 * NONE when neither is below `end`.
 * `tally` (kept across calls) counts records, DUMMYs, RECORDs and DELETEs, and at the last
 * COMMIT the RECORDs, the DELETEs and the records up to it.
 * Returns the count; `*next` is where scanning stopped and `*status` OK (reached `limit`),
 * FULL (`cap` reached) or ANOMALY (the reference reports a problem at `*next`). */
int64_t mqf_twoskip_scan(const uint8_t *buf, int64_t end, int64_t start, int64_t limit,
                         int64_t cap, int64_t *off_out, uint8_t *type_out, uint8_t *level_out,
                         uint32_t *klen_out, uint32_t *vlen_out, uint64_t *next_out,
                         int64_t *tally, int64_t *next, int32_t *status) {
    int64_t off = start, n = 0;
    *status = OK;
    while (off < end && off < limit) {
        if (n >= cap) {
            *status = FULL;
            break;
        }
        if (end - off >= 8 && memcmp(buf + off, BLANK, 8) == 0) {
            off += 8;
            continue;
        }
        if (end - off < 8) {
            *status = ANOMALY;
            break;
        }
        const uint8_t *h = buf + off;
        int code = type_code(h[0]);
        unsigned level = h[1];
        uint64_t kl = ((uint64_t)h[2] << 8) | h[3];
        uint64_t vl = be32(h + 4);
        int64_t p = off + 8;
        uint8_t flags = 0;
        if (code == 0 || level > MAXLEVEL) {
            *status = ANOMALY;
            break;
        }
        if (kl == 0xFFFF) {
            if (end - p < 8) {
                *status = ANOMALY;
                break;
            }
            kl = be64(buf + p);
            p += 8;
            flags |= EXT_KEY;
        }
        if (vl == 0xFFFFFFFFu) {
            if (end - p < 8) {
                *status = ANOMALY;
                break;
            }
            vl = be64(buf + p);
            p += 8;
            flags |= EXT_VALUE;
        }
        /* Lengths beyond the file (or beyond what the arrays hold) are the reference's to
         * report; checking them first keeps the sums below from overflowing. */
        if (kl > 0xFFFFFFFFu || vl > 0xFFFFFFFFu || kl > (uint64_t)end || vl > (uint64_t)end) {
            *status = ANOMALY;
            break;
        }
        int64_t head_end = p + 8 * (int64_t)(level + 1);
        int64_t tail = head_end + 8;
        int64_t padded = (int64_t)((kl + vl + 7) / 8 * 8);
        if (tail > end || padded > end - tail) {
            *status = ANOMALY;
            break;
        }
        if (mqf_crc32(0, h, (size_t)(head_end - off)) != be32(buf + head_end) ||
            mqf_crc32(0, buf + tail, (size_t)padded) != be32(buf + head_end + 4)) {
            *status = ANOMALY;
            break;
        }
        off_out[n] = off;
        type_out[n] = (uint8_t)code | flags;
        level_out[n] = (uint8_t)level;
        klen_out[n] = (uint32_t)kl;
        vlen_out[n] = (uint32_t)vl;
        uint64_t a = be64(buf + p), b = level >= 1 ? be64(buf + p + 8) : (uint64_t)end;
        uint64_t e = (uint64_t)end;
        if (code == T_DELETE) next_out[n] = a;
        else if (a < e) next_out[n] = (b >= e || a > b) ? a : b;
        else next_out[n] = b < e ? b : NONE;
        n++;
        tally[0]++;
        if (code == T_DUMMY) tally[1]++;
        else if (code == T_RECORD) tally[2]++;
        else if (code == T_DELETE) tally[3]++;
        else {
            tally[4] = tally[2];
            tally[5] = tally[3];
            tally[6] = tally[0];
        }
        off = tail + padded;
    }
    *next = off;
    return n;
}

/* The index of the record at file offset `target` (offsets ascend), or -1. `hint` is tried
 * first: in a repacked file the successor is the next record. */
static int64_t find(const int64_t *off, int64_t n, uint64_t target, int64_t hint) {
    if (hint >= 0 && hint < n && (uint64_t)off[hint] == target) return hint;
    int64_t lo = 0, hi = n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if ((uint64_t)off[mid] == target) return mid;
        if ((uint64_t)off[mid] < target) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* The level-0 walk from the DUMMY (index 0) in key order, as twoskip._walk, along the
 * successors the scan chose (`succ`), through DELETEs by their first pointer. Writes
 * the index of each live RECORD to `order`; returns 0 when done, 1 after `steps` records (call
 * again to go on), -1 at anything the reference reports (bad pointer, loop, a non-RECORD
 * target). `state` holds where it is, how many it wrote and the highest index written (start
 * with 0, 0, -1); `seen` holds n zeroed bytes. Key order is checked separately
 * (mqf_twoskip_ordered). Both pause so the caller can release the pages they touched. */
int64_t mqf_twoskip_walk(const int64_t *off, const uint8_t *type, const uint64_t *succ,
                         int64_t n, uint64_t end, uint8_t *seen, int64_t *order, int64_t *state,
                         int64_t steps) {
    int64_t at = state[0], count = state[1];
    if (count == 0 && (n == 0 || off[0] != 64 || (type[0] & 0x0F) != T_DUMMY)) return -1;
    for (;; steps--) {
        if (steps <= 0) {
            state[0] = at;
            state[1] = count;
            return 1;
        }
        uint64_t nxt = succ[at];
        if (nxt == NONE) return -1;
        int64_t target = -1;
        while (nxt) {
            target = find(off, n, nxt, at + 1);
            if (target < 0 || seen[target]) return -1;
            if ((type[target] & 0x0F) != T_DELETE) break;
            seen[target] = 1;
            at = target;
            nxt = succ[target];
            if (nxt >= end) return -1;
        }
        if (!nxt || target < 0) {
            state[1] = count;
            return 0;
        }
        seen[target] = 1;
        if ((type[target] & 0x0F) != T_RECORD) return -1;
        order[count++] = target;
        if (target > state[2]) state[2] = target;
        at = target;
    }
}

/* Where record i's key starts: after its head (8 bytes, the 64-bit lengths, level + 1
 * pointers) and its two CRCs. */
static int64_t key_at(const int64_t *off, const uint8_t *type, const uint8_t *level, int64_t i) {
    int64_t ext = ((type[i] & EXT_KEY) ? 8 : 0) + ((type[i] & EXT_VALUE) ? 8 : 0);
    return off[i] + 8 + ext + 8 * ((int64_t)level[i] + 1) + 8;
}

/* Bytes of the file a row adds to what is resident: its record when it follows the previous
 * row's record within a page, else its record and a page. `*last` is the previous row's end. */
static int64_t touched(int64_t start, int64_t stop, int64_t *last) {
    int64_t add = (start >= *last && start - *last < 4096) ? stop - *last : stop - start + 4096;
    *last = stop;
    return add;
}

/* The first i in [from, to) where key order[i] is not above key order[i-1] (bytewise, a
 * prefix below its extensions), or -1. Stops early, with `*next` at the first row not
 * compared, once the rows' keys span more than `budget` bytes of the file. */
int64_t mqf_twoskip_ordered(const uint8_t *buf, const int64_t *off, const uint8_t *type,
                            const uint8_t *level, const uint32_t *klen, const int64_t *order,
                            int64_t from, int64_t to, int64_t budget, int64_t *next) {
    int64_t used = 0, last = -1;
    int64_t i = from < 1 ? 1 : from;
    for (; i < to && used <= budget; i++) {
        int64_t a = order[i - 1], b = order[i];
        uint32_t la = klen[a], lb = klen[b];
        int64_t kb = key_at(off, type, level, b);
        int c = memcmp(buf + key_at(off, type, level, a), buf + kb, la < lb ? la : lb);
        if (c > 0 || (c == 0 && la >= lb)) return i;
        used += touched(off[b], kb + lb, &last);
    }
    *next = i;
    return -1;
}

/* For rows from `from` (of `index`, or every record when it is NULL) on, while the records
 * span at most `budget` bytes of the file (at least one row) and fewer than `cap`: where each
 * key starts, where it ends (the value starts) and where the value ends. Returns the count. */
int64_t mqf_twoskip_spans(const int64_t *off, const uint8_t *type, const uint8_t *level,
                          const uint32_t *klen, const uint32_t *vlen, const int64_t *index,
                          int64_t from, int64_t to, int64_t budget, int64_t cap,
                          int64_t *key_out, int64_t *mid_out, int64_t *end_out) {
    int64_t used = 0, last = -1, n = 0;
    for (int64_t i = from; i < to && n < cap && (n == 0 || used <= budget); i++, n++) {
        int64_t r = index ? index[i] : i;
        int64_t k = key_at(off, type, level, r);
        key_out[n] = k;
        mid_out[n] = k + klen[r];
        end_out[n] = k + klen[r] + vlen[r];
        used += touched(off[r], end_out[n], &last);
    }
    return n;
}
