/* Skiplist hot loops for skiplist_fast.py: the record scan into flat arrays and the level-0
 * walk in key order. Both stop at the first thing the reference reader (skiplist.py) would
 * report, so the caller can hand the file to it; they never read outside [buf, buf + len).
 * Big-endian 32-bit fields, as lib/cyrusdb_skiplist.c writes them. */
#include <stdint.h>
#include <string.h>

#define MAXPOINTERS 20
#define NO_PTR 0xFFFFFFFFu

/* Type codes stored in `type`. */
enum { T_DUMMY = 1, T_INORDER = 2, T_ADD = 3, T_DELETE = 4, T_COMMIT = 5 };

enum { OK = 0, ANOMALY = 1, FULL = 2 };

static uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static int type_code(uint32_t c) {
    switch (c) {
        case 257: return T_DUMMY;
        case 1: return T_INORDER;
        case 2: return T_ADD;
        case 4: return T_DELETE;
        case 255: return T_COMMIT;
        default: return 0;
    }
}

static int64_t pad4(int64_t n) { return (n + 3) / 4 * 4; }

/* Scan records from `start` while they begin below `limit` (<= `len`) and fewer than `cap`
 * are written. Writes per record its offset, type code, number of forward pointers (a
 * DELETE's one pointer counts), key and value lengths and first pointer (0 when none). Returns
 * the count; `*next` is where scanning stopped and `*status` OK, FULL or ANOMALY (the reference
 * reports a problem at `*next`). */
int64_t mqf_skiplist_scan(const uint8_t *buf, int64_t len, int64_t start, int64_t limit,
                          int64_t cap, int64_t *off_out, uint8_t *type_out, uint8_t *nptr_out,
                          uint32_t *klen_out, uint32_t *vlen_out, uint32_t *ptr0_out,
                          int64_t *next, int32_t *status) {
    int64_t off = start, n = 0;
    *status = OK;
    while (off < len && off < limit) {
        if (n >= cap) {
            *status = FULL;
            break;
        }
        if (len - off < 4) {
            *status = ANOMALY;
            break;
        }
        int code = type_code(be32(buf + off));
        uint32_t kl = 0, vl = 0, first = 0;
        int64_t nptr = 0, size;
        if (code == 0) {
            *status = ANOMALY;
            break;
        } else if (code == T_COMMIT) {
            size = 4;
        } else if (code == T_DELETE) {
            if (len - off < 8) {
                *status = ANOMALY;
                break;
            }
            first = be32(buf + off + 4);
            nptr = 1;
            size = 8;
        } else {
            int64_t p = off + 4;
            if (len - p < 4 || (kl = be32(buf + p)) > len - p - 4) {
                *status = ANOMALY;
                break;
            }
            p += 4 + pad4(kl);
            if (p > len - 4 || (vl = be32(buf + p)) > len - p - 4) {
                *status = ANOMALY;
                break;
            }
            p += 4 + pad4(vl);
            int bad = 0;
            for (;;) {
                if (p > len - 4) {
                    bad = 1;
                    break;
                }
                uint32_t ptr = be32(buf + p);
                if (ptr == NO_PTR) break;
                if (nptr == 0) first = ptr;
                nptr++;
                p += 4;
                if (nptr > MAXPOINTERS) {
                    bad = 1;
                    break;
                }
            }
            if (bad) {
                *status = ANOMALY;
                break;
            }
            size = p + 4 - off;
        }
        off_out[n] = off;
        type_out[n] = (uint8_t)code;
        nptr_out[n] = (uint8_t)nptr;
        klen_out[n] = kl;
        vlen_out[n] = vl;
        ptr0_out[n] = first;
        n++;
        off += size;
    }
    *next = off;
    return n;
}

static int64_t find(const int64_t *off, int64_t n, int64_t target, int64_t hint) {
    if (hint >= 0 && hint < n && off[hint] == target) return hint;
    int64_t lo = 0, hi = n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (off[mid] == target) return mid;
        if (off[mid] < target) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* The level-0 walk from the DUMMY (index 0) by each record's first pointer, as skiplist.read:
 * every target an INORDER or ADD record not seen before, keys ascending. Writes the live
 * records' indices to `order` and returns how many, or -1 at anything the reference reports.
 * `seen` holds n zeroed bytes. */
int64_t mqf_skiplist_walk(const uint8_t *buf, const int64_t *off, const uint8_t *type,
                          const uint8_t *nptr, const uint32_t *klen, const uint32_t *ptr0,
                          int64_t n, uint8_t *seen, int64_t *order) {
    if (n == 0 || off[0] != 48 || type[0] != T_DUMMY) return -1;
    int64_t count = 0, at = 0;
    seen[0] = 1;
    while (nptr[at] > 0 && ptr0[at] != 0) {
        int64_t target = find(off, n, ptr0[at], at + 1);
        if (target < 0 || seen[target]) return -1;
        if (type[target] != T_INORDER && type[target] != T_ADD) return -1;
        if (count > 0) {
            int64_t last = order[count - 1];
            uint32_t la = klen[last], lb = klen[target];
            int c = memcmp(buf + off[last] + 8, buf + off[target] + 8, la < lb ? la : lb);
            if (c > 0 || (c == 0 && la >= lb)) return -1;
        }
        seen[target] = 1;
        order[count++] = target;
        at = target;
    }
    return count;
}
