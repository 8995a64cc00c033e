/*
 * json_schema.h - JSON Schema -> GBNF, for structured output
 * (response_format json_schema / json_object, `run --json-schema`).
 *
 * Supported (the common subset; semantics follow llama.cpp's
 * json-schema-to-grammar where it has any):
 *   type (string or array of types), enum, const, $ref into the same
 *   document (#, #/$defs/X, #/definitions/X, any JSON pointer; recursive
 *   references are fine), anyOf, oneOf (as anyOf: exclusivity is not
 *   enforced), allOf with a single member;
 *   objects: properties, required, additionalProperties (false or absent
 *   with properties: no other keys, as llama.cpp; true or a schema: other
 *   keys, never equal to a declared one, after the declared ones);
 *   properties come out in schema order, required ones first; a required
 *   name without a property schema takes any value;
 *   arrays: items, prefixItems / items as an array (an exact tuple),
 *   minItems, maxItems;
 *   strings: minLength, maxLength (counted in code points; \u escapes of
 *   surrogates are never produced, so every escape is one code point),
 *   format date, time, date-time (RFC 3339, exact day-of-month and leap
 *   years; times carry a zone) and uuid;
 *   integers: minimum, maximum, exclusiveMinimum, exclusiveMaximum (exact
 *   decimal ranges; fractional bounds rounded inwards), at most 16 digits;
 *   numbers: at most 16 integer and 16 fraction digits and a two-digit
 *   exponent (so every number is a finite double);
 *   annotations (title, description, default, examples, $schema, $id,
 *   $comment, deprecated, readOnly, writeOnly) are ignored, and so are
 *   keywords JSON Schema does not define.
 * Refused with an error that names the keyword and where it is:
 *   pattern, patternProperties, not, if/then/else, uniqueItems, contains,
 *   multipleOf, min/maxProperties, propertyNames, dependent*, unevaluated*,
 *   additionalItems, $anchor/$dynamicRef, allOf with several members,
 *   minimum/maximum on numbers, formats other than the four above,
 *   remote $refs, keywords next to $ref / anyOf that would constrain it,
 *   maxLength/maxItems above BD_GRAMMAR_MAX_REPEAT, nesting deeper than
 *   JSON_SCHEMA_MAX_DEPTH, and schemas that match nothing (false, empty
 *   enum, minLength > maxLength, ...).
 * The output allows the whitespace llama.cpp's grammars allow: none or one
 * space, or one or two newlines and up to 20 spaces/tabs, after { [ , :
 * and before } ]; nothing before or after the root value.
 */
#ifndef BD_JSON_SCHEMA_H
#define BD_JSON_SCHEMA_H

#include <jansson.h>
#include <stddef.h>

#include "../decode/grammar.h"

#define JSON_SCHEMA_MAX_DEPTH 64        /* nested schemas (objects in arrays in ...) */
#define JSON_SCHEMA_MAX_GBNF (2 << 20)  /* bytes of generated grammar */

/* GBNF text for the schema (malloc'd, NUL-terminated), or NULL with a
 * message in err (one line, naming unsupported keywords and their
 * location as JSON pointers). */
char *json_schema_to_gbnf(const json_t *schema, char *err, size_t errlen);

/* GBNF for any JSON object (response_format {"type": "json_object"}). */
const char *json_object_gbnf(void);

/* Schema -> compiled grammar over vocabulary v (NULL schema: any JSON
 * object). NULL with a message on error. */
bd_grammar *json_schema_grammar(const json_t *schema, const bd_grammar_vocab *v, char *err, size_t errlen);

#endif
