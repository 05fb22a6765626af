/* text: growing heap strings, the XML escaper, hex, and UTF-8 validation. */
#ifndef QKV_UTIL_TEXT_H
#define QKV_UTIL_TEXT_H

#include <stddef.h>
#include <stdio.h>

/* Formats into a growing heap string (for building files in memory). */
typedef struct {
    char *buf;
    size_t len, cap;
} StrBuf;
void sb_printf(StrBuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_append(StrBuf *sb, const char *s, size_t n);
/* Appends s as XML/HTML text or attribute value (double-quoted): the one escaper of
 * every SVG and HTML qkv writes. & < > " become entities; control bytes, which XML 1.0
 * cannot hold, are dropped. */
void sb_append_xml(StrBuf *sb, const char *s);
void sb_free(StrBuf *sb);
/* About how many pixels s takes in a sans-serif font of `font` pixels: 0.6 em a
 * character (UTF-8 code points), a little over the mean of Latin text, so that an SVG
 * sized by it holds its titles whole. */
int text_px(const char *s, int font);

/* Bytes as lower-case hex (malloc'd), and back (*out malloc'd; -1 on a bad digit). */
char *hex_encode(const void *data, size_t n);
int hex_decode(const char *hex, char **out, size_t *n);

/* A control byte (below 0x20, or 0x7f) as error messages spell it: "\n", "\t", "\xNN",
 * into out; its length. A user's text must not move a terminal's cursor, colour it or
 * ring it. */
int spell_control(char out[8], unsigned char ch);
/* s[0..n) to f, each control byte spelled. */
void fput_spelled(FILE *f, const char *s, size_t n);

/* The length of the well-formed UTF-8 character s starts with (1 to 4), or 0 for a NUL or
 * a byte that starts none (no overlongs, surrogates, U+FFFE/U+FFFF or past U+10FFFF). */
size_t utf8_char(const char *s);
/* 1 if s[0..n) is well-formed UTF-8 (no overlongs, no surrogates). */
int utf8_valid(const char *s, size_t n);

/* Appends data[0..n) in base64 (RFC 4648, padded), e.g. for a data: URI. */
void sb_append_base64(StrBuf *sb, const void *data, size_t n);

#endif
