// spm: see spm.h. The only C++ in qkv: it turns SentencePiece's C++ API into the C API
// above and keeps every exception and status inside this file.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "data/spm.h"
#include "util.h"
}

// Declared by the library but not in its public headers: training logs at INFO level
// unless told otherwise, before it even reads --minloglevel.
namespace sentencepiece {
namespace logging {
void SetMinLogLevel(int v);
}
}  // namespace sentencepiece

struct Spm {
    sentencepiece::SentencePieceProcessor proc;
};

namespace {

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

}  // namespace

extern "C" int spm_train(const char *const *lines, size_t n, const char *kind, int vocab_size, char **model_out,
                         size_t *len_out) {
    std::string args = std::string("--model_type=") + kind + " --vocab_size=" + std::to_string(vocab_size) +
                       " --pad_id=0 --bos_id=1 --eos_id=2 --unk_id=3 --byte_fallback=true"
                       " --character_coverage=1.0 --normalization_rule_name=nmt_nfkc --num_threads=1"
                       " --minloglevel=2 --input_sentence_size=0 --shuffle_input_sentence=false";
    sentencepiece::logging::SetMinLogLevel(2);
    try {
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
    } catch (const std::exception &e) {
        return err_set("training a %s model: %s", kind, e.what());
    }
}

extern "C" Spm *spm_load(const char *bytes, size_t len, const char *what) {
    Spm *s = new (std::nothrow) Spm;
    if (!s) return nullptr;
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
}

extern "C" void spm_free(Spm *s) { delete s; }

extern "C" int spm_size(const Spm *s) { return s->proc.GetPieceSize(); }

extern "C" const char *spm_piece(const Spm *s, int id) {
    if (id < 0 || id >= s->proc.GetPieceSize()) return "<unk>";
    return s->proc.IdToPiece(id).c_str();
}

extern "C" int spm_encode(const Spm *s, const char *text, int *ids, int max) {
    std::vector<int> out;
    auto st = s->proc.Encode(text, &out);
    if (!st.ok()) return err_set("encoding with SentencePiece: %s", st.message());
    for (size_t i = 0; i < out.size() && (int)i < max; i++) ids[i] = out[i];
    return (int)out.size();
}

extern "C" int spm_encode_pieces(const Spm *s, const char *text, void (*fn)(const char *, size_t, void *), void *ctx) {
    std::vector<std::string> out;
    auto st = s->proc.Encode(text, &out);
    if (!st.ok()) return err_set("encoding with SentencePiece: %s", st.message());
    for (const auto &p : out) fn(p.data(), p.size(), ctx);
    return 0;
}

extern "C" char *spm_decode(const Spm *s, const int *ids, int n) {
    std::vector<int> v;
    int size = s->proc.GetPieceSize();
    for (int i = 0; i < n; i++)
        if (ids[i] > 3 && ids[i] < size) v.push_back(ids[i]);
    std::string text;
    if (!s->proc.Decode(v, &text).ok()) text.clear();
    return xstrdup(text.c_str());
}
