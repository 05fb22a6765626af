/* config_yaml: see config_yaml.h. */
#include "config_yaml.h"

#include <stdio.h>
#include <string.h>

#include "util/err.h"

/* A config is a few dozen keys three levels deep: the limits past which text is none */
#define YAML_DEPTH_MAX 16
#define YAML_EVENTS_MAX 100000

/* "name:line:col: YAML syntax error: ..." for a failed parse. A reader error (bytes that are
 * not UTF-8, a control character) has no mark, only the byte offset where it stopped: its
 * line and column (in characters, as the marks count) come from the text itself, so the
 * user is not sent to 1:1. */
static int yaml_syntax_error(const yaml_parser_t *p, const char *text, size_t len, const char *name) {
    const char *problem = p->problem ? p->problem : "unreadable";
    if (p->error != YAML_READER_ERROR)
        return err_set("%s:%zu:%zu: YAML syntax error: %s", name, p->problem_mark.line + 1, p->problem_mark.column + 1,
                       problem);
    size_t at = p->problem_offset < len ? p->problem_offset : len, line = 1, col = 1;
    for (size_t i = 0; i < at; i++)
        if (text[i] == '\n') line++, col = 1;
        else if (((unsigned char)text[i] & 0xC0) != 0x80) col++; /* a continuation byte is no new character */
    if (p->problem_value >= 0)
        return err_set("%s:%zu:%zu: YAML syntax error: %s (byte 0x%02x)", name, line, col, problem,
                       (unsigned)p->problem_value & 0xFFu);
    return err_set("%s:%zu:%zu: YAML syntax error: %s", name, line, col, problem);
}

/* One document of bounded depth and size whose scalars hold no NUL (a "\0" escape would
 * cut the string short unseen); nothing after it, not even after "...". -1 with the error
 * set, syntax errors included. */
static int yaml_prescan(const char *text, size_t len, size_t max, const char *name) {
    if (len > max) return err_set("%s: %zu bytes of YAML, more than the %zu a config may hold", name, len, max);
    yaml_parser_t p;
    yaml_parser_initialize(&p);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int depth = 0, docs = 0, rc = 0;
    for (long n = 0; rc == 0; n++) {
        yaml_event_t e;
        if (!yaml_parser_parse(&p, &e)) { /* anywhere: the loader would stop reading after the first document */
            rc = yaml_syntax_error(&p, text, len, name);
            break;
        }
        yaml_event_type_t type = e.type;
        yaml_mark_t at = e.start_mark;
        if (n >= YAML_EVENTS_MAX)
            rc = err_set("%s:%zu:%zu: more than %d YAML nodes: not a config", name, at.line + 1, at.column + 1,
                         YAML_EVENTS_MAX);
        else if (type == YAML_DOCUMENT_START_EVENT && ++docs > 1)
            rc = err_set("%s:%zu:%zu: a second YAML document: a config is one document, with nothing after its end",
                         name, at.line + 1, at.column + 1);
        else if ((type == YAML_MAPPING_START_EVENT || type == YAML_SEQUENCE_START_EVENT) && ++depth > YAML_DEPTH_MAX)
            rc = err_set("%s:%zu:%zu: nested more than %d levels deep: not a config", name, at.line + 1, at.column + 1,
                         YAML_DEPTH_MAX);
        else if (type == YAML_MAPPING_END_EVENT || type == YAML_SEQUENCE_END_EVENT) depth--;
        else if (type == YAML_SCALAR_EVENT && memchr(e.data.scalar.value, '\0', e.data.scalar.length))
            rc = err_set("%s:%zu:%zu: a string holding a NUL character", name, at.line + 1, at.column + 1);
        yaml_event_delete(&e);
        if (type == YAML_STREAM_END_EVENT) break;
    }
    yaml_parser_delete(&p);
    return rc;
}

int config_yaml_load(const char *text, size_t len, size_t max, const char *name, yaml_document_t *doc) {
    if (yaml_prescan(text, len, max, name) != 0) return -1;
    yaml_parser_t parser;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    int rc = yaml_parser_load(&parser, doc) ? 0 : yaml_syntax_error(&parser, text, len, name);
    yaml_parser_delete(&parser); /* the document holds its own nodes */
    return rc;
}
