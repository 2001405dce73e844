/* The records of a Postfix queue file that its envelope reader needs, walked in C.
 *
 * Follows records.py's read_records exactly on a file that reads cleanly: each record's type
 * byte and 7-bit length groups, pointer records followed (a dummy pointer to 0 skipped, at most
 * 10000 reverse jumps), padding skipped, reading stopped at the end record. Of the records read,
 * those envelope.py's read_envelope ignores (inside the message body, other than M and X) are
 * left out; the others are written to the output arrays. Anything else (damage of any kind, or
 * more records than the arrays hold) returns a negative value and the caller reads the file with
 * the reference reader, which says what the damage is. Every read is bounds-checked.
 */
#include <stddef.h>
#include <stdint.h>

#define LENGTH_BITS 32
#define REVERSE_JUMP_LIMIT 10000
#define ENVELOPE 0
#define HEADERS 1
#define BODY 2
#define EXTRACTED 3

/* A pointer record's target (records.py _pointer_target), or -1 when it is not a clean one:
 * leading " \t\r\n\v\f" skipped, then one or more ASCII digits only, below `size`. */
static int64_t pointer_target(const uint8_t *p, uint64_t len, uint64_t size) {
    uint64_t i = 0, value = 0;
    while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n' ||
                       p[i] == '\v' || p[i] == '\f'))
        i++;
    if (i == len) return -1;
    for (; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        value = value * 10 + (uint64_t)(p[i] - '0');
        if (value >= size) return -1; /* digits only grow it */
    }
    return (int64_t)value;
}

/* Returns the number of records written (the last one the end record), or -1 (damage: the
 * reference reader reports it) or -2 (more than `capacity` records). */
int64_t mqf_postfix_envelope_records(const uint8_t *data, uint64_t size, int64_t capacity,
                                     int64_t *offsets, uint8_t *types, int64_t *starts,
                                     int64_t *lengths) {
    uint64_t offset = 0, last_target = 0;
    int64_t count = 0, reverse_jumps = 0;
    int section = ENVELOPE;
    uint64_t partial = 0; /* length of the header line continued by L records */
    while (offset < size) {
        uint8_t kind = data[offset];
        uint64_t length = 0, position = offset + 1;
        int shift = 0;
        for (;;) {
            if (shift >= LENGTH_BITS || position >= size) return -1;
            uint8_t byte = data[position++];
            length |= (uint64_t)(byte & 0x7F) << shift;
            if (!(byte & 0x80)) break;
            shift += 7;
        }
        if (length > size - position) return -1;
        uint64_t record = offset;
        offset = position + length;
        if (kind == 'p') {
            int64_t target = pointer_target(data + position, length, size);
            if (target < 0) return -1;
            if (target == 0) continue;
            if ((uint64_t)target <= last_target && ++reverse_jumps > REVERSE_JUMP_LIMIT)
                return -1;
            offset = last_target = (uint64_t)target;
            continue;
        }
        if (kind == 'w') continue;
        /* read_envelope's sections: which records it can use. */
        int keep = 1;
        if (section == HEADERS && (kind == 'L' || kind == 'N')) {
            uint64_t merged = partial + length;
            partial = 0;
            if (kind == 'L') partial = merged;
            else if (merged == 0) section = BODY;
        } else if (kind == 'M') {
            section = HEADERS;
        } else if (kind == 'X') {
            section = EXTRACTED;
        } else if (section == HEADERS) {
            section = BODY;
        } else if (section == BODY) {
            keep = 0;
        }
        if (keep || kind == 'E') {
            if (count >= capacity) return -2;
            offsets[count] = (int64_t)record;
            types[count] = kind;
            starts[count] = (int64_t)position;
            lengths[count] = (int64_t)length;
            count++;
        }
        if (kind == 'E') return count;
    }
    return -1;
}
