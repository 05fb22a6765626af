/* sentence: the one sentence a command is asked about (--text, and --target or the model's
 * greedy translation) as ids, with the messages every such command gives. Only the
 * command layer includes this. */
#ifndef QKV_CMDLIB_SENTENCE_H
#define QKV_CMDLIB_SENTENCE_H

#include "run/run.h"
#include "util/text.h"

/* The source ids of text and the target ids of target, or of the greedy translation when
 * target is NULL; src and tgt have room for max_positions - 1 ids. Warns on stderr of
 * source words read as <unk>; -1 with the error set (naming the option) for an
 * empty text, a side longer than the model's positions, or a target word the vocabulary
 * lacks. text_option names the text's option in those ("--text", patch's "--clean"). */
int cmd_sentence_ids(Run *r, const char *text_option, const char *text, const char *target, int *src, int *n_src,
                     int *tgt, int *n_tgt);

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
