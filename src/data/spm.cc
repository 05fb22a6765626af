// spm: see spm.h. The only C++ in qkv: it turns SentencePiece's C++ API into the C API
// above and keeps every exception and status inside this file: each extern "C" function
// catches everything (out of memory becomes an error like any other, never an abort).
//
// It also checks what the library trusts: a model's normalizer keeps its character map
// as a darts-clone double-array trie that the library walks without bounds checks
// (SentencePiece issue #1269), so a crafted .model can make it read anywhere. The trie is
// validated here, from the model's bytes, before the library sees them.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

extern "C" {
#include "data/spm.h"

#include "util/err.h"
#include "util/mem.h"
}

// Declared by the library but not in its public headers: training logs at INFO level
// unless told otherwise, before it even reads --minloglevel.
namespace sentencepiece {
namespace logging {
void SetMinLogLevel(int v);
}
} // namespace sentencepiece

struct Spm {
    sentencepiece::SentencePieceProcessor proc;
};

namespace {

// The exception being handled as qkv's error (call it only inside a catch block): out of
// memory is the machine's fault (exit 1); anything else is reported with what it says.
int caught(const char *doing) {
    try {
        throw;
    } catch (const std::bad_alloc &) {
        err_set("%s: out of memory", doing);
        return err_io(ENOMEM);
    } catch (const std::exception &e) {
        return err_set("%s: %s", doing, e.what());
    } catch (...) {
        return err_set("%s: SentencePiece failed with an unknown exception", doing);
    }
}

// ---- the model's bytes: protocol buffer wire format, as far as the checks need ----

// One field of a message: its number, wire type and, for a length-delimited one, its bytes.
struct Field {
    uint32_t number;
    unsigned type;
    const unsigned char *data;
    size_t len;
};

bool read_varint(const unsigned char *&p, const unsigned char *end, uint64_t *v) {
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 70 && p < end; shift += 7) {
        unsigned char b = *p++;
        if (shift < 64) x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false; /* runs past the end, or longer than the 10 bytes protobuf allows */
}

// The next field of the message [p, end): 1, 0 at its end, -1 when the bytes are not a
// message. Stricter than protobuf where a model never goes (groups), never looser: a
// field this reads is the field the library reads.
int next_field(const unsigned char *&p, const unsigned char *end, Field *f) {
    if (p == end) return 0;
    uint64_t tag, n;
    if (!read_varint(p, end, &tag) || tag > UINT32_MAX || (tag >> 3) == 0) return -1;
    f->number = (uint32_t)(tag >> 3), f->type = (unsigned)(tag & 7), f->data = p, f->len = 0;
    switch (f->type) {
    case 0: return read_varint(p, end, &n) ? 1 : -1;
    case 1: return end - p >= 8 ? (p += 8, 1) : -1;
    case 5: return end - p >= 4 ? (p += 4, 1) : -1;
    case 2:
        if (!read_varint(p, end, &n) || n > INT32_MAX || n > (uint64_t)(end - p)) return -1;
        f->data = p, f->len = (size_t)n, p += n;
        return 1;
    default: return -1; /* groups (3, 4), which no model holds, and the unused 6, 7 */
    }
}

// ---- the normalizer's character map ----
//
// precompiled_charsmap is <trie size: 4 bytes, little-endian><trie: 32-bit units>
// <replacements: NUL-terminated strings>. Each unit packs a label (low 8 bits, bit 31
// set on a leaf unit), a has-leaf flag (bit 8) and an offset (bits 10-31, shifted left 8
// more when bit 9 is set). The library matches a text's prefix by walking from unit 0:
// a node's children sit at (node ^ offset) ^ byte, a child counts when its label is that
// byte, and a child with the flag has its leaf, a unit whose low 31 bits are where its
// replacement starts, at (child ^ child's offset). It keeps the first 32 matches in a
// fixed array but loops over all of them.

const size_t kMaxMatches = 32; /* Normalizer::kMaxTrieResultsSize */

uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
uint32_t unit_label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
bool unit_has_leaf(uint32_t u) { return (u >> 8) & 1; }

// Every unit a walk can reach, for every byte a text can hold: 0, or -1 with why (n bytes).
int check_charsmap(const unsigned char *blob, size_t size, char *why, size_t n) {
    if (size == 0) return 0; /* no map: the text is left as it is */
    if (size <= 4) return snprintf(why, n, "%zu bytes, too few to hold a trie", size), -1;
    size_t trie_bytes = le32(blob), n_units = trie_bytes / 4;
    if (trie_bytes > size - 4) return snprintf(why, n, "a trie of %zu bytes in a map of %zu", trie_bytes, size), -1;
    if (n_units == 0) return snprintf(why, n, "an empty trie"), -1;
    const unsigned char *units = blob + 4, *text = blob + 4 + trie_bytes;
    size_t text_len = size - 4 - trie_bytes, text_end = 0; /* one past the last NUL */
    for (size_t i = text_len; i > 0; i--)
        if (text[i - 1] == '\0') {
            text_end = i;
            break;
        }
    auto unit = [&](size_t i) { return le32(units + 4 * i); };

    // Depth-first from the root, each node once. state: 0 not seen, 1 on the current
    // path (met again: a loop), else 2 + the most leaves on a path from it (at most 32).
    // A node's children are listed when it is entered and wait on a stack of their own;
    // one met on the path ends the walk there, so no two nodes on the path share their
    // children's block and the lists together hold fewer entries than the trie has units.
    std::vector<unsigned char> state(n_units, 0);
    struct Frame {
        uint32_t node, first, next, end; /* its children are kids[first, end); next: the next to follow */
        unsigned most;                   /* the most leaves on a path from one of them */
    };
    std::vector<Frame> path;
    std::vector<uint32_t> kids;
    auto loop = [&](uint32_t node) { snprintf(why, n, "the trie loops back to unit %u", node); };
    auto enter = [&](uint32_t node, bool root) -> bool {
        uint32_t u = unit(node), base = node ^ unit_offset(u), block = base & ~0xFFu, low = base & 0xFF;
        if ((size_t)block + 0xFF >= n_units) {
            snprintf(why, n, "trie unit %u leads to units %u-%u, past the trie's %zu", node, block, block + 0xFF,
                     n_units);
            return false;
        }
        if (!root && unit_has_leaf(u)) {
            uint32_t at = unit(base) & ((1u << 31) - 1);
            if (at >= text_end) {
                snprintf(why, n, "trie unit %u points at byte %u of the %zu bytes of replacements%s", node, at,
                         text_len, at < text_len ? ", after the last NUL" : "");
                return false;
            }
        }
        state[node] = 1;
        uint32_t first = (uint32_t)kids.size();
        unsigned most = 0;
        for (uint32_t j = 0; j < 256; j++) { /* the child for byte c sits at base ^ c = block + (c ^ low) */
            if (unit_label(unit(block + j)) != (j ^ low)) continue;
            unsigned char st = state[block + j];
            if (st == 1) return loop(block + j), false;
            if (st == 0) kids.push_back(block + j);
            else if (st - 2u > most) most = st - 2u;
        }
        path.push_back(Frame{node, first, first, (uint32_t)kids.size(), most});
        return true;
    };
    if (!enter(0, true)) return -1;
    while (!path.empty()) {
        Frame &f = path.back();
        if (f.next == f.end) {
            unsigned leaves = f.most + (f.node != 0 && unit_has_leaf(unit(f.node)));
            if (leaves > kMaxMatches)
                return snprintf(why, n, "trie unit %u starts %u nested rules; SentencePiece keeps at most %zu matches",
                                f.node, leaves, kMaxMatches),
                       -1;
            state[f.node] = (unsigned char)(2 + leaves);
            kids.resize(f.first); /* the top of that stack: the children of nodes below are gone */
            path.pop_back();
            if (!path.empty() && leaves > path.back().most) path.back().most = leaves;
            continue;
        }
        uint32_t child = kids[f.next++];
        if (state[child] == 1) return loop(child), -1;
        if (state[child] >= 2) { /* reached by another way since it was listed */
            if (state[child] - 2u > f.most) f.most = state[child] - 2u;
            continue;
        }
        if (!enter(child, false)) return -1; /* f may dangle now: not used again this turn */
    }
    return 0;
}

// Every character map in a serialized ModelProto (normalizer_spec = 3, denormalizer_spec
// = 5, each NormalizerSpec's precompiled_charsmap = 2; a message field given twice is
// merged by protobuf, so each one is checked). 0; -1 with why for a bad map; -2 when the
// bytes are not a protocol buffer message that next_field reads (then not a model).
int check_model(const unsigned char *p, const unsigned char *end, char *why, size_t n) {
    Field f, g;
    int rc;
    while ((rc = next_field(p, end, &f)) == 1) {
        if ((f.number != 3 && f.number != 5) || f.type != 2) continue;
        const char *spec = f.number == 3 ? "normalizer_spec" : "denormalizer_spec";
        const unsigned char *q = f.data, *q_end = f.data + f.len;
        while ((rc = next_field(q, q_end, &g)) == 1) {
            if (g.number != 2 || g.type != 2) continue;
            int len = snprintf(why, n, "%s.precompiled_charsmap: ", spec);
            if (check_charsmap(g.data, g.len, why + len, n - (size_t)len) != 0) return -1;
        }
        if (rc < 0) return -2;
    }
    return rc < 0 ? -2 : 0;
}

// Feeds the training lines from memory, so the text is never written to a file.
class LineIterator : public sentencepiece::SentenceIterator {
  public:
    LineIterator(const char *const *lines, size_t n) : lines_(lines), n_(n) { load(); }
    bool done() const override { return i_ >= n_; }
    void Next() override {
        i_++;
        load();
    }
    const std::string &value() const override { return value_; }
    sentencepiece::util::Status status() const override { return sentencepiece::util::Status(); }

  private:
    void load() {
        if (i_ < n_) value_ = lines_[i_];
    }
    const char *const *lines_;
    size_t n_, i_ = 0;
    std::string value_;
};

} // namespace

extern "C" int spm_train(const char *const *lines, size_t n, const char *kind, int vocab_size, char **model_out,
                         size_t *len_out) {
    try {
        std::string args = std::string("--model_type=") + kind + " --vocab_size=" + std::to_string(vocab_size) +
                           " --pad_id=0 --bos_id=1 --eos_id=2 --unk_id=3 --byte_fallback=true"
                           " --character_coverage=1.0 --normalization_rule_name=nmt_nfkc --num_threads=1"
                           " --minloglevel=2 --input_sentence_size=0 --shuffle_input_sentence=false";
        sentencepiece::logging::SetMinLogLevel(2);
        LineIterator it(lines, n);
        std::string model;
        auto st = sentencepiece::SentencePieceTrainer::Train(args, &it, &model);
        if (!st.ok()) {
            /* the library's messages start with its source position and the failed check */
            std::string why = st.message();
            size_t at = why.find("] ");
            if (at != std::string::npos) why = why.substr(at + 2);
            return err_set("training a %s model of %d pieces: %s", kind, vocab_size, why.c_str());
        }
        *model_out = static_cast<char *>(xmalloc(model.size() ? model.size() : 1));
        memcpy(*model_out, model.data(), model.size());
        *len_out = model.size();
        return 0;
    } catch (...) {
        char doing[64];
        snprintf(doing, sizeof doing, "training a %s model", kind);
        return caught(doing);
    }
}

extern "C" Spm *spm_load(const char *bytes, size_t len, const char *what) {
    Spm *s = nullptr;
    try {
        char why[256];
        const unsigned char *p = reinterpret_cast<const unsigned char *>(bytes);
        int rc = check_model(p, p + len, why, sizeof why);
        if (rc == -2) {
            err_set("%s: not a SentencePiece model (not a protocol buffer message)", what);
            return nullptr;
        }
        if (rc != 0) {
            err_set("%s: not a valid SentencePiece model: %s", what, why);
            return nullptr;
        }
        /* the library would log a failed self-test of the model line by line */
        sentencepiece::logging::SetMinLogLevel(2);
        s = new Spm;
        auto st = s->proc.LoadFromSerializedProto(std::string(bytes, len));
        if (!st.ok()) {
            err_set("%s: not a SentencePiece model (%s)", what, st.message());
            delete s;
            return nullptr;
        }
        if (s->proc.pad_id() != 0 || s->proc.bos_id() != 1 || s->proc.eos_id() != 2 || s->proc.unk_id() != 3) {
            err_set("%s: special ids pad %d, bos %d, eos %d, unk %d; qkv needs 0, 1, 2, 3 (train it with --pad_id=0 "
                    "--bos_id=1 --eos_id=2 --unk_id=3)",
                    what, s->proc.pad_id(), s->proc.bos_id(), s->proc.eos_id(), s->proc.unk_id());
            delete s;
            return nullptr;
        }
        return s;
    } catch (...) {
        delete s;
        caught(what);
        return nullptr;
    }
}

extern "C" void spm_free(Spm *s) { delete s; }

extern "C" int spm_size(const Spm *s) {
    try {
        return s->proc.GetPieceSize();
    } catch (...) {
        return 0;
    }
}

extern "C" const char *spm_piece(const Spm *s, int id) {
    try {
        if (id < 0 || id >= s->proc.GetPieceSize()) return "<unk>";
        return s->proc.IdToPiece(id).c_str();
    } catch (...) {
        return "<unk>";
    }
}

extern "C" int spm_encode(const Spm *s, const char *text, int *ids, int max) {
    try {
        std::vector<int> out;
        auto st = s->proc.Encode(text, &out);
        if (!st.ok()) return err_set("encoding with SentencePiece: %s", st.message());
        for (size_t i = 0; i < out.size() && (int)i < max; i++) ids[i] = out[i];
        return (int)out.size();
    } catch (...) {
        return caught("encoding with SentencePiece");
    }
}

extern "C" int spm_encode_pieces(const Spm *s, const char *text, void (*fn)(const char *, size_t, void *), void *ctx) {
    try {
        std::vector<std::string> out;
        auto st = s->proc.Encode(text, &out);
        if (!st.ok()) return err_set("encoding with SentencePiece: %s", st.message());
        for (const auto &p : out) fn(p.data(), p.size(), ctx);
        return 0;
    } catch (...) {
        return caught("encoding with SentencePiece");
    }
}

// The byte piece id's byte, or -1 for any other piece.
static int byte_of(const Spm *s, int id) {
    if (!s->proc.IsByte(id)) return -1;
    const std::string &p = s->proc.IdToPiece(id); // "<0xNN>"
    return p.size() == 6 ? (int)std::strtol(p.c_str() + 3, nullptr, 16) : -1;
}

// How many bytes of b (n of them) open one character (UTF-8 as the Unicode standard's
// table 3-7 has it) and whether they make it whole: a valid character's length, or the
// length of the longest start of one (at least 1) that the next byte does not continue.
static int utf8_prefix(const unsigned char *b, int n, int *whole) {
    unsigned char c = b[0];
    int need = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    // the second byte's range: narrower after E0, ED, F0, F4 (no overlong form, surrogate or
    // code point past U+10FFFF)
    unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    int k = 1;
    for (; k < need && k < n; k++) {
        unsigned lo_k = k == 1 ? lo : 0x80, hi_k = k == 1 ? hi : 0xBF;
        if (b[k] < lo_k || b[k] > hi_k) break;
    }
    *whole = need > 0 && k == need;
    return k;
}

// SentencePiece turns each byte of a run of byte pieces that does not begin a whole
// character into one U+FFFD: a character cut short (E4 B8) reads as two. The Unicode
// standard's practice, which every browser's TextDecoder, transformers.js among them,
// and Python follow, reads each longest start of a character as one: the ids keep the
// first byte of each such start, which SentencePiece then reads as that one U+FFFD.
static void cut_short_characters(const Spm *s, std::vector<int> &v) {
    std::vector<int> out;
    out.reserve(v.size());
    for (size_t i = 0; i < v.size();) {
        size_t j = i;
        std::vector<unsigned char> run;
        for (int b; j < v.size() && (b = byte_of(s, v[j])) >= 0; j++) run.push_back((unsigned char)b);
        if (run.empty()) {
            out.push_back(v[i++]);
            continue;
        }
        for (size_t k = 0; k < run.size();) {
            int whole, len = utf8_prefix(run.data() + k, (int)(run.size() - k), &whole);
            for (int t = 0; t < (whole ? len : 1); t++) out.push_back(v[i + k + t]);
            k += (size_t)len;
        }
        i = j;
    }
    v.swap(out);
}

extern "C" char *spm_decode(const Spm *s, const int *ids, int n) {
    try {
        std::vector<int> v;
        int size = s->proc.GetPieceSize();
        for (int i = 0; i < n; i++)
            if (ids[i] > 3 && ids[i] < size) v.push_back(ids[i]);
        cut_short_characters(s, v);
        std::string text;
        if (!s->proc.Decode(v, &text).ok()) text.clear();
        // a byte piece 0x00 writes a NUL, which a line of text cannot hold (and a C string
        // would end at): it writes nothing, as the exported decoder's does
        text.erase(std::remove(text.begin(), text.end(), '\0'), text.end());
        return xstrdup(text.c_str());
    } catch (...) {
        caught("decoding with SentencePiece");
        return nullptr;
    }
}
