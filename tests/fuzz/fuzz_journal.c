/* fuzz_journal.c — libFuzzer target: a session journal's bytes, read as start-up and
 * `kronosd journal check` read them (the header, then every record's frame, checksum,
 * payload and rules). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "journal_scan.h"
#include "fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kd_jbuf expected = {0};
    if (kd_journal_encode_header(&expected, 0x1234, "fuzz model") < 0) return 0;
    kd_journal_header h;
    char why[512], err[512];
    const kd_header_status hs = kd_journal_read_header(data, size, &expected, &h, why, sizeof why);
    kd_jbuf_free(&expected);
    const size_t from = hs == KD_HEADER_OK ? h.end : (size < 20 ? size : 20);
    kd_jscan s;
    if (kd_journal_scan(data, from, size, NULL, &s, err, sizeof err) == 0) kd_jscan_free(&s);
    return 0;
}
