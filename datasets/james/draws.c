/* The per-row draws of the James generator's normal rows, replayed from Python's random.Random.
 *
 * The reference generator (generate.py, _base_row and _normal_chunk) draws each row's
 * recipients, host, attributes, headers, state, sender, lastupdated offset and blob ids one call
 * at a time from a random.Random; how many 32-bit words a row consumes depends on its values
 * (rejection sampling), so the rows cannot be drawn independently. This walks the same
 * Mersenne Twister (MT19937, Matsumoto and Nishimura's published algorithm) from the state
 * Python's getstate() gives, with CPython's documented rules: getrandbits(k <= 32) is the top k
 * bits of one word, getrandbits(128) is four words from the least significant one, and
 * randrange(n) draws getrandbits(n.bit_length()) until the value is below n.
 */
#include <stdint.h>

#define MT_N 624
#define MT_M 397

typedef struct {
    uint32_t mt[MT_N];
    int pos;
} twister;

static void regenerate(twister *s) {
    static const uint32_t mag[2] = {0u, 0x9908b0dfu};
    uint32_t y;
    int k;
    for (k = 0; k < MT_N - MT_M; k++) {
        y = (s->mt[k] & 0x80000000u) | (s->mt[k + 1] & 0x7fffffffu);
        s->mt[k] = s->mt[k + MT_M] ^ (y >> 1) ^ mag[y & 1u];
    }
    for (; k < MT_N - 1; k++) {
        y = (s->mt[k] & 0x80000000u) | (s->mt[k + 1] & 0x7fffffffu);
        s->mt[k] = s->mt[k + (MT_M - MT_N)] ^ (y >> 1) ^ mag[y & 1u];
    }
    y = (s->mt[MT_N - 1] & 0x80000000u) | (s->mt[0] & 0x7fffffffu);
    s->mt[MT_N - 1] = s->mt[MT_M - 1] ^ (y >> 1) ^ mag[y & 1u];
    s->pos = 0;
}

static uint32_t word(twister *s) {
    if (s->pos >= MT_N) regenerate(s);
    uint32_t y = s->mt[s->pos++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

static int bit_length(uint32_t n) {
    int k = 0;
    while (n) {
        k++;
        n >>= 1;
    }
    return k;
}

/* randrange(n) for 1 <= n < 2**32. */
static uint32_t below(twister *s, uint32_t n) {
    int k = bit_length(n);
    uint32_t r;
    do {
        r = word(s) >> (32 - k);
    } while (r >= n);
    return r;
}

/* uuid.UUID(int=getrandbits(128), version=4) as its 16 big-endian bytes. */
static void uuid4(twister *s, uint8_t *out) {
    uint32_t w[4];
    for (int i = 0; i < 4; i++) w[i] = word(s);
    for (int i = 0; i < 4; i++) {
        uint32_t v = w[3 - i];
        out[4 * i] = (uint8_t)(v >> 24);
        out[4 * i + 1] = (uint8_t)(v >> 16);
        out[4 * i + 2] = (uint8_t)(v >> 8);
        out[4 * i + 3] = (uint8_t)v;
    }
    out[6] = (uint8_t)((out[6] & 0x0f) | 0x40);
    out[8] = (uint8_t)((out[8] & 0x3f) | 0x80);
}

enum {
    F_RECIPIENTS, /* 1..3 */
    F_USER0, F_DOMAIN0, F_USER1, F_DOMAIN1, F_USER2, F_DOMAIN2,
    F_HOST, F_AUTH, F_HEADER, F_STATE, F_SENDER_USER, F_SENDER_DOMAIN,
    F_LAST_UPDATED, /* 1..4 ms before the enqueue instant */
    F_SUBJECT, F_BODY,
    FIELDS /* 16 */
};

/* Replay `n` rows. `state`: the 624 key words and the position of getstate(), updated.
 * `with_blobs[i]`: row i also draws its header and body (a live row when blobs are made).
 * `bounce`: the queue is "bounces" (no sender drawn). Writes `fields` (n x 16 bytes), `keys`
 * (n x 32 bytes: header then body blob uuid) and `message_ids` (0 where not drawn).
 * Returns 0, or -1 for arguments out of range. */
int mqf_james_rows(uint32_t *state, int64_t n, const uint8_t *with_blobs, int32_t bounce,
                   int32_t users, int32_t domains, int32_t hosts, int32_t states,
                   int32_t subjects, int32_t bodies, uint8_t *fields, uint8_t *keys,
                   uint32_t *message_ids) {
    if (n < 0 || state[MT_N] > MT_N || users < 1 || users > 255 || domains < 1 ||
        domains > 255 || hosts < 1 || hosts > 255 || states < 1 || states > 255 ||
        subjects < 1 || subjects > 255 || bodies < 1 || bodies > 255)
        return -1;
    twister s;
    for (int i = 0; i < MT_N; i++) s.mt[i] = state[i];
    s.pos = (int)state[MT_N];
    for (int64_t i = 0; i < n; i++) {
        uint8_t *f = fields + FIELDS * i;
        for (int j = 0; j < FIELDS; j++) f[j] = 0;
        uint32_t count = 1 + below(&s, 3);
        f[F_RECIPIENTS] = (uint8_t)count;
        for (uint32_t j = 0; j < count; j++) {
            f[F_USER0 + 2 * j] = (uint8_t)below(&s, (uint32_t)users);
            f[F_DOMAIN0 + 2 * j] = (uint8_t)below(&s, (uint32_t)domains);
        }
        f[F_HOST] = (uint8_t)below(&s, (uint32_t)hosts);
        f[F_AUTH] = below(&s, 4) == 0;
        f[F_HEADER] = below(&s, 5) == 0;
        f[F_STATE] = (uint8_t)below(&s, (uint32_t)states);
        if (!bounce) {
            f[F_SENDER_USER] = (uint8_t)below(&s, (uint32_t)users);
            f[F_SENDER_DOMAIN] = (uint8_t)below(&s, (uint32_t)domains);
        }
        f[F_LAST_UPDATED] = (uint8_t)(1 + below(&s, 4));
        uuid4(&s, keys + 32 * i);
        uuid4(&s, keys + 32 * i + 16);
        message_ids[i] = 0;
        if (with_blobs[i]) {
            message_ids[i] = below(&s, 1000000000u);
            f[F_SUBJECT] = (uint8_t)below(&s, (uint32_t)subjects);
            f[F_BODY] = (uint8_t)below(&s, (uint32_t)bodies);
        }
    }
    for (int i = 0; i < MT_N; i++) state[i] = s.mt[i];
    state[MT_N] = (uint32_t)s.pos;
    return 0;
}
