/* The log-queue segment reader's hot loop (columnar.py drives it; segment.py is the reference).
 *
 * lq_scan walks whole records from state[0]: header, CRC and payload checked as the reading
 * rules say, the header fields written to flat arrays and the payload written as the JSON text
 * Python's json.dumps(values, sort_keys=True) gives (ensure_ascii, ", " and ": " separators).
 * It stops at the first record that is not a whole record of a known type with a payload that
 * decodes (the caller hands that offset to the reference reader for one step), when the batch
 * is full, at the first record that starts at or past state[S_LIMIT] (the caller releases the
 * mapped pages it has passed, then resumes), or at the end of the buffer. Every read is
 * bounds-checked against `len`; every write against the capacities given. The record types
 * come from format.py through `spec_t`. */
#include <stdint.h>
#include <string.h>

#include "crc32.h"

#define HEADER 44
#define MAX_PAYLOAD (1u << 24)
#define MAX_FIELDS 8
#define UNKNOWN 0xFF

enum { K_U8 = 1, K_U16, K_U32, K_U64, K_STR, K_STRS, K_OUTCOMES, K_POSITIONS };
enum { ST_END = 0, ST_FULL = 1, ST_STOP = 2, ST_PAUSE = 3 };
enum { S_POS = 0, S_ROWS = 1, S_STATUS = 2, S_EMIT = 3, S_NEED = 4, S_LIMIT = 5 };

typedef struct {
    const uint8_t *nfields;   /* [256] fields per type code; UNKNOWN: not a version-1 type */
    const uint8_t *kinds;     /* [256 * MAX_FIELDS] field kinds in payload order */
    const uint8_t *order;     /* [256 * MAX_FIELDS] field indexes in sorted-key order */
    const int32_t *key_start; /* [256 * MAX_FIELDS] into keys: `{"name": ` or `, "name": ` */
    const int32_t *key_len;
    const uint8_t *keys;
} spec_t;

static inline uint32_t be16(const uint8_t *p) { return ((uint32_t)p[0] << 8) | p[1]; }
static inline uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t be64(const uint8_t *p) {
    return ((uint64_t)be32(p) << 32) | be32(p + 4);
}

/* Strict UTF-8, as Python's decoder: no overlongs, no surrogates, nothing above U+10FFFF. */
static int utf8_valid(const uint8_t *s, uint32_t n) {
    uint32_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            if (n - i < 2 || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (n - i < 3) return 0;
            uint8_t lo = 0x80, hi = 0xBF;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
            if (s[i + 1] < lo || s[i + 1] > hi || (s[i + 2] & 0xC0) != 0x80) return 0;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (n - i < 4) return 0;
            uint8_t lo = 0x80, hi = 0xBF;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
            if (s[i + 1] < lo || s[i + 1] > hi || (s[i + 2] & 0xC0) != 0x80 ||
                (s[i + 3] & 0xC0) != 0x80)
                return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

/* Payload cursor: every step checks that the bytes are there. */
typedef struct {
    const uint8_t *p;
    uint32_t n, at;
} cursor_t;

static int take_int(cursor_t *c, uint32_t size, uint64_t *value) {
    if (c->n - c->at < size) return 0;
    const uint8_t *q = c->p + c->at;
    *value = size == 1 ? q[0] : size == 2 ? be16(q) : size == 4 ? be32(q) : be64(q);
    c->at += size;
    return 1;
}

static int take_str(cursor_t *c) {
    uint64_t size;
    if (!take_int(c, 2, &size) || c->n - c->at < size) return 0;
    if (!utf8_valid(c->p + c->at, (uint32_t)size)) return 0;
    c->at += (uint32_t)size;
    return 1;
}

static uint32_t int_size(uint8_t kind) {
    return kind == K_U8 ? 1 : kind == K_U16 ? 2 : kind == K_U32 ? 4 : 8;
}

/* Checks the payload decodes exactly as its fields say; `at[i]` is where field i starts. */
static int parse(const uint8_t *p, uint32_t n, const uint8_t *kinds, int nf, uint32_t *at) {
    cursor_t c = {p, n, 0};
    uint64_t v, count;
    for (int i = 0; i < nf; i++) {
        at[i] = c.at;
        uint8_t kind = kinds[i];
        switch (kind) {
        case K_U8: case K_U16: case K_U32: case K_U64:
            if (!take_int(&c, int_size(kind), &v)) return 0;
            break;
        case K_STR:
            if (!take_str(&c)) return 0;
            break;
        case K_STRS: case K_OUTCOMES: case K_POSITIONS:
            if (!take_int(&c, 2, &count)) return 0;
            for (uint64_t k = 0; k < count; k++) {
                if (!take_str(&c)) return 0;
                if (kind == K_OUTCOMES && !(take_int(&c, 1, &v) && take_str(&c))) return 0;
                if (kind == K_POSITIONS && !(take_int(&c, 4, &v) && take_int(&c, 4, &v)))
                    return 0;
            }
            break;
        default:
            return 0;
        }
    }
    return c.at == n;
}

/* JSON output into [o, end): writes past `end` are dropped and flagged (never expected: the
 * caller reserves 8 bytes per payload byte and more, which bounds every expansion). */
typedef struct {
    uint8_t *o, *end;
    int overflow;
} out_t;

static inline void put(out_t *w, const void *s, size_t n) {
    if ((size_t)(w->end - w->o) < n) {
        w->overflow = 1;
        return;
    }
    memcpy(w->o, s, n);
    w->o += n;
}

static void put_uint(out_t *w, uint64_t v) {
    char digits[20];
    int k = 20;
    do {
        digits[--k] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put(w, digits + k, (size_t)(20 - k));
}

static const char HEX[] = "0123456789abcdef";

static void put_u_escape(out_t *w, uint32_t unit) {
    char e[6] = {'\\', 'u', HEX[(unit >> 12) & 15], HEX[(unit >> 8) & 15], HEX[(unit >> 4) & 15],
                 HEX[unit & 15]};
    put(w, e, 6);
}

/* 1 for the bytes json.dumps copies as they are (printable ASCII but for `"` and `\`). */
static const uint8_t plain[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

/* A validated UTF-8 string as json.dumps writes it with ensure_ascii. */
static void put_str(out_t *w, const uint8_t *s, uint32_t n) {
    put(w, "\"", 1);
    uint32_t i = 0;
    while (i < n) {
        uint32_t run = i;
        while (run < n && plain[s[run]]) run++;
        put(w, s + i, run - i);
        i = run;
        if (i >= n) break;
        uint8_t c = s[i];
        uint32_t cp;
        if (c < 0x80) {
            i++;
            switch (c) {
            case '"': put(w, "\\\"", 2); continue;
            case '\\': put(w, "\\\\", 2); continue;
            case '\n': put(w, "\\n", 2); continue;
            case '\r': put(w, "\\r", 2); continue;
            case '\t': put(w, "\\t", 2); continue;
            case '\b': put(w, "\\b", 2); continue;
            case '\f': put(w, "\\f", 2); continue;
            default: put_u_escape(w, c); continue;
            }
        } else if (c < 0xE0) {
            cp = ((uint32_t)(c & 0x1F) << 6) | (s[i + 1] & 0x3F);
            i += 2;
        } else if (c < 0xF0) {
            cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) |
                 (s[i + 2] & 0x3F);
            i += 3;
        } else {
            cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) |
                 ((uint32_t)(s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
            i += 4;
        }
        if (cp >= 0x10000) {
            cp -= 0x10000;
            put_u_escape(w, 0xD800 | (cp >> 10));
            put_u_escape(w, 0xDC00 | (cp & 0x3FF));
        } else {
            put_u_escape(w, cp);
        }
    }
    put(w, "\"", 1);
}

/* Field values of a payload already checked by `parse`: lengths are trusted here. */
static uint32_t emit_str(out_t *w, const uint8_t *p, uint32_t at) {
    uint32_t size = be16(p + at);
    put_str(w, p + at + 2, size);
    return at + 2 + size;
}

static void emit_field(out_t *w, const uint8_t *p, uint32_t at, uint8_t kind) {
    switch (kind) {
    case K_U8: put_uint(w, p[at]); return;
    case K_U16: put_uint(w, be16(p + at)); return;
    case K_U32: put_uint(w, be32(p + at)); return;
    case K_U64: put_uint(w, be64(p + at)); return;
    case K_STR: emit_str(w, p, at); return;
    default: break;
    }
    uint32_t count = be16(p + at);
    at += 2;
    put(w, "[", 1);
    for (uint32_t k = 0; k < count; k++) {
        if (k) put(w, ", ", 2);
        if (kind == K_STRS) {
            at = emit_str(w, p, at);
        } else if (kind == K_OUTCOMES) {
            put(w, "[", 1);
            at = emit_str(w, p, at);
            put(w, ", ", 2);
            put_uint(w, p[at]);
            put(w, ", ", 2);
            at = emit_str(w, p, at + 1);
            put(w, "]", 1);
        } else {
            put(w, "[", 1);
            at = emit_str(w, p, at);
            put(w, ", ", 2);
            put_uint(w, be32(p + at));
            put(w, ", ", 2);
            put_uint(w, be32(p + at + 4));
            put(w, "]", 1);
            at += 8;
        }
    }
    put(w, "]", 1);
}

static void emit_json(out_t *w, const spec_t *spec, uint8_t type, const uint8_t *p,
                      const uint32_t *at) {
    int nf = spec->nfields[type];
    if (nf == 0) {
        put(w, "{}", 2);
        return;
    }
    for (int j = 0; j < nf; j++) {
        int slot = type * MAX_FIELDS + j;
        int i = spec->order[slot];
        put(w, spec->keys + spec->key_start[slot], (size_t)spec->key_len[slot]);
        emit_field(w, p, at[i], spec->kinds[type * MAX_FIELDS + i]);
    }
    put(w, "}", 1);
}

static void put_uuid(uint8_t *o, const uint8_t *m) {
    for (int k = 0; k < 16; k++) {
        if (k == 4 || k == 6 || k == 8 || k == 10) *o++ = '-';
        *o++ = (uint8_t)HEX[m[k] >> 4];
        *o++ = (uint8_t)HEX[m[k] & 15];
    }
}

void lq_scan(const uint8_t *buf, int64_t len, const uint8_t *nfields, const uint8_t *kinds,
             const uint8_t *order, const int32_t *key_start, const int32_t *key_len,
             const uint8_t *keys, int64_t rows_cap, int64_t *offset, int32_t *type,
             uint64_t *time_us, uint32_t *ref_segment, int64_t *ref_offset, int64_t *size,
             uint8_t *mid_text, int32_t *json_offsets, uint8_t *json, int64_t json_cap,
             int64_t *state) {
    spec_t spec = {nfields, kinds, order, key_start, key_len, keys};
    int64_t pos = state[S_POS], rows = state[S_ROWS], limit = state[S_LIMIT];
    int emit = state[S_EMIT] != 0;
    int64_t status = ST_END;
    uint32_t at[MAX_FIELDS];
    state[S_NEED] = 0;
    while (pos < len) {
        if (pos >= limit) { status = ST_PAUSE; break; }
        if (pos < 0 || len - pos < HEADER) { status = ST_STOP; break; }
        const uint8_t *h = buf + pos;
        uint32_t length = be32(h + 4);
        uint8_t code = h[2];
        int nf = nfields[code];
        if (h[0] != 'R' || h[1] != 'Q' || length > MAX_PAYLOAD || length > len - pos - HEADER ||
            nf == UNKNOWN || nf > MAX_FIELDS) {
            status = ST_STOP;
            break;
        }
        const uint8_t *payload = h + HEADER;
        uint32_t crc = mqf_crc32(mqf_crc32(0, h, HEADER - 4), payload, length);
        if (crc != be32(h + 40) || !parse(payload, length, kinds + code * MAX_FIELDS, nf, at)) {
            status = ST_STOP;
            break;
        }
        if (emit) {
            int64_t need = 8 * (int64_t)length + 1024;
            if (rows >= rows_cap || json_cap - json_offsets[rows] < need) {
                state[S_NEED] = need;
                status = ST_FULL;
                break;
            }
            offset[rows] = pos;
            type[rows] = code;
            time_us[rows] = be64(h + 8);
            ref_segment[rows] = be32(h + 32);
            ref_offset[rows] = be32(h + 36);
            size[rows] = HEADER + (int64_t)length;
            put_uuid(mid_text + rows * 36, h + 16);
            out_t w = {json + json_offsets[rows], json + json_cap, 0};
            emit_json(&w, &spec, code, payload, at);
            if (w.overflow) { /* cannot happen with `need` reserved; refuse rather than cut */
                status = ST_STOP;
                break;
            }
            json_offsets[rows + 1] = (int32_t)(w.o - json);
        }
        rows++;
        pos += HEADER + (int64_t)length;
    }
    state[S_POS] = pos;
    state[S_ROWS] = rows;
    state[S_STATUS] = status;
}
