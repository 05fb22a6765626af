/* sentence: what the commands say of a sentence a user typed (the words read as <unk>)
 * and of a target word they name; the sentence itself is read by each analysis's call
 * (data/sentence_ids.h). Only the command layer includes this. */
#ifndef QKV_CMDLIB_SENTENCE_H
#define QKV_CMDLIB_SENTENCE_H

#include "run/run.h"
#include "util/text.h"

/* The words of a source line that the source vocabulary reads as <unk>, each once, quoted
 * and separated by ", " into unknown (the caller's, sb_free'd); how many. */
int cmd_unknown_source_words(const Run *r, const char *line, StrBuf *unknown);

/* The warning on stderr of source words read as <unk> (unknown as sentence_ids lists them;
 * nothing when empty); option names the sentence's option, or is NULL. */
void cmd_warn_unknown(const char *option, const StrBuf *unknown);

/* The id of a word given to `option` that must be one token of the target vocabulary
 * (--contrast, --compare); -1 with the error set ("<option>: 'w' is N tokens ..., not one",
 * or "... is not in the target vocabulary"). */
int cmd_target_token(const Run *r, const char *option, const char *word);

#endif
