/*
 * constrain.h - structured output for the server's completion endpoints
 * (constrain.c): response_format, llama-server's grammar / json_schema
 * fields and the serve command line's default grammar, as GBNF compiled
 * per job over the model's vocabulary.
 */
#ifndef BD_SERVER_CONSTRAIN_H
#define BD_SERVER_CONSTRAIN_H

#include "server_int.h"
#include "../decode/grammar.h"

/* The grammar root asks for: "grammar" (GBNF), "json_schema", and with
 * chat also "response_format"; none of them: the server's default grammar
 * (serve --grammar / -j), if any. true with *gbnf malloc'd GBNF text and
 * *field the field it came from (for messages), or NULL for unconstrained
 * output; false with *status (400: the request's
 * fault, naming the field) and err. The text is not compiled here
 * (srv_grammar_compile needs the model). */
bool srv_constraint_parse(const server *s, json_t *root, bool chat, char **gbnf, const char **field, int *status,
                          char *err, size_t errlen);

/* Model m's vocabulary for grammars, built on first use and kept with the
 * model (immutable, shared by every job). NULL with err. */
const bd_grammar_vocab *srv_model_gvocab(srv_model *m, char *err, size_t errlen);

/* A grammar for one job (a bd_grammar is used by one generation at a
 * time), or NULL with the parser's message in err. */
bd_grammar *srv_grammar_compile(srv_model *m, const char *gbnf, char *err, size_t errlen);

#endif
