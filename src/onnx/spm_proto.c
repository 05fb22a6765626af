/* spm_proto: see spm_proto.h. The field numbers are sentencepiece_model.proto's: ModelProto
 * pieces 1 (piece 1, score 2, type 3), trainer_spec 2 (model_type 3, byte_fallback 35),
 * normalizer_spec 3 (name 1, precompiled_charsmap 2, add_dummy_prefix 3,
 * remove_extra_whitespaces 4, escape_whitespaces 5; the last three true unless said). */
#include "onnx/spm_proto.h"

#include <stdlib.h>
#include <string.h>

#include "onnx/protobuf.h"
#include "util/err.h"
#include "util/mem.h"

static int read_piece(SpmProto *s, const uint8_t *data, size_t len) {
    PbReader r = {data, data + len};
    PbField f;
    int rc;
    char *piece = NULL;
    float score = 0.0f;
    int type = SPM_NORMAL;
    while ((rc = pb_next(&r, &f)) > 0) {
        if (f.field == 1 && f.wire == 2) {
            free(piece);
            piece = xmalloc(f.len + 1);
            memcpy(piece, f.data, f.len), piece[f.len] = 0;
        } else if (f.field == 2 && f.wire == 5) {
            uint32_t bits = (uint32_t)f.v;
            memcpy(&score, &bits, sizeof score);
        } else if (f.field == 3 && f.wire == 0) type = (int)f.v;
    }
    if (rc < 0 || !piece) return free(piece), -1;
    s->piece = xrealloc(s->piece, sizeof(char *) * (size_t)(s->n + 1));
    s->score = xrealloc(s->score, sizeof(float) * (size_t)(s->n + 1));
    s->type = xrealloc(s->type, sizeof(int) * (size_t)(s->n + 1));
    s->piece[s->n] = piece, s->score[s->n] = score, s->type[s->n] = type;
    s->n++;
    return 0;
}

static int read_trainer(SpmProto *s, const uint8_t *data, size_t len) {
    PbReader r = {data, data + len};
    PbField f;
    int rc;
    while ((rc = pb_next(&r, &f)) > 0) {
        if (f.field == 3 && f.wire == 0) s->model_type = (int)f.v;
        else if (f.field == 35 && f.wire == 0) s->byte_fallback = f.v != 0;
    }
    return rc;
}

static int read_normalizer(SpmProto *s, const uint8_t *data, size_t len) {
    PbReader r = {data, data + len};
    PbField f;
    int rc;
    while ((rc = pb_next(&r, &f)) > 0) {
        if (f.field == 1 && f.wire == 2) {
            size_t n = f.len < sizeof s->norm_name - 1 ? f.len : sizeof s->norm_name - 1;
            memcpy(s->norm_name, f.data, n), s->norm_name[n] = 0;
        } else if (f.field == 2 && f.wire == 2) s->charsmap = f.data, s->charsmap_len = f.len;
        else if (f.field == 3 && f.wire == 0) s->add_dummy_prefix = f.v != 0;
        else if (f.field == 4 && f.wire == 0) s->remove_extra_whitespaces = f.v != 0;
        else if (f.field == 5 && f.wire == 0) s->escape_whitespaces = f.v != 0;
    }
    return rc;
}

int spm_proto_read(SpmProto *s, const void *bytes, size_t len, const char *what) {
    memset(s, 0, sizeof *s);
    s->model_type = SPM_UNIGRAM;
    s->add_dummy_prefix = s->remove_extra_whitespaces = s->escape_whitespaces = 1;
    PbReader r = {bytes, (const uint8_t *)bytes + len};
    PbField f;
    int rc;
    while ((rc = pb_next(&r, &f)) > 0) {
        if (f.wire != 2) continue;
        if (f.field == 1) rc = read_piece(s, f.data, f.len);
        else if (f.field == 2) rc = read_trainer(s, f.data, f.len);
        else if (f.field == 3) rc = read_normalizer(s, f.data, f.len);
        if (rc < 0) break;
    }
    if (rc >= 0 && s->n > 0) return 0;
    spm_proto_free(s);
    return err_set("%s: not a SentencePiece model the export can read", what);
}

void spm_proto_free(SpmProto *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) free(s->piece[i]);
    free(s->piece), free(s->score), free(s->type);
    memset(s, 0, sizeof *s);
}
