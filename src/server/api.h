/*
 * api.h - what the files of the OpenAI surface share (internal to
 * src/server/api*.c):
 *
 *   api_req.c   the request's fields: every field of the body is known
 *               (implemented, or refused with 400 naming it), checked for
 *               type and range, and turned into a gen_req
 *   api.c       the handlers: prompts, jobs (one per choice), waiting
 *   api_resp.c  response bodies and server-sent event streams: choices,
 *               tool calls, log-probabilities, usage, timings, speculative
 */
#ifndef BD_SERVER_API_H
#define BD_SERVER_API_H

#include "compat.h"
#include "../chat/toolcall.h"

#define ERR_INVALID "invalid_request_error"
#define MHD_NO_RESULT 0 /* MHD_NO: close the connection without a response */

/* Jobs of one request: prompts x choices (n, or best_of candidates). */
#define API_MAX_JOBS 16
#define API_MAX_LOGIT_BIAS 1024
#define API_MAX_TOOLS 128

enum { API_CHAT = 1, API_COMPLETIONS = 2 };
enum { TOOL_CHOICE_AUTO = 0, TOOL_CHOICE_NONE, TOOL_CHOICE_REQUIRED, TOOL_CHOICE_NAMED };

typedef struct gen_req {
    int endpoint;           /* API_CHAT / API_COMPLETIONS */
    srv_model *m;
    bd_gen_params gp;
    bd_logit_bias *bias;    /* [n_bias] owned; gp.sampling.logit_bias points here */
    int n_bias;
    bool seed_given;
    int max_tokens;         /* -1: until EOG / context end */
    bool stream, include_usage;
    bool return_prompt_ids; /* blockdraft extension: prompt (and generated) token ids in the body */
    json_t *stop;           /* borrowed: null, string or array */
    char model_name[GALLERY_NAME_MAX];
    int n;                  /* choices per prompt */
    int best_of;            /* completions: candidates per prompt (>= n), the best n returned */
    int top_logprobs;       /* -1: off; else alternatives per token */
    bool cache_prompt;
    bool echo;              /* completions: the prompt before the text */
    bool spec_set;          /* speculative.* given */
    int32_t spec_n_max, spec_n_min;
    float spec_p_min;
    char *gbnf;             /* owned: the grammar every choice obeys (constrain.h), or NULL */
    const char *gbnf_field; /* the field it came from */
    json_t *test_output;    /* borrowed string: the test hook's forced output */
    /* chat tools */
    json_t *tools;          /* borrowed array or NULL */
    int tool_choice;        /* TOOL_CHOICE_* */
    const char *tool_name;  /* TOOL_CHOICE_NAMED */
    bool parallel_tool_calls;
} gen_req;

/* api_req.c */
/* Parse the body as a JSON object; on failure a 400 is queued (*rc). */
json_t *api_parse_body(srv_req *r, int *rc);
/* Every field of root: known for this endpoint, right type and range.
 * Fills g (model resolved, sampling set). false with a response queued. */
bool api_parse_request(srv_req *r, json_t *root, int endpoint, gen_req *g, int *rc);
/* Frees what g owns and releases its model reference. */
void api_gen_req_free(srv_req *r, gen_req *g);
/* 400 naming the parameter: "'param' what". */
int api_bad(srv_req *r, const char *param, const char *what);

/* One choice of a response, and its stream state. */
typedef struct api_choice {
    srv_job *j;
    int index;
    int prompt_index;       /* which prompt (completions with several) */
    bool starts_in_think;
    bool parse_tools;
    const char *pre;        /* text the output is the continuation of (forced tool-call start); borrowed */
    /* streaming */
    chat_think_stream think;
    chat_tool_stream tools;
    size_t sent, mark, lp_sent, lp_limit;
    int calls_sent;
    bool started, finished;
    json_t *calls;          /* parsed calls so far */
} api_choice;

typedef struct api_out {
    srv_model *m;            /* held (srv_model_hold) until api_out_free */
    bool chat;
    char id[64];
    char model[GALLERY_NAME_MAX];
    long created;
    bool include_usage;
    bool reasoning;
    int top_logprobs;
    json_t *tools;           /* a reference (the stream outlives the request body) */
    char *echo_text[API_MAX_JOBS]; /* completions with echo: each prompt's text (owned) */
    size_t echo_len[API_MAX_JOBS];
    int n_prompts;
    int n_choices;
    api_choice ch[API_MAX_JOBS];
    char *pre;               /* owned: see api_choice.pre */
    bool have_stats;         /* stats set before best_of dropped candidates (they count in usage) */
    bd_gen_stats stats;
    char *piece;             /* [piece_cap] token text scratch */
    int piece_cap;
} api_out;

/* api_resp.c */
void api_out_init(api_out *o, const gen_req *g, bool chat);
void api_out_free(api_out *o);         /* drops the jobs' references */
/* Sum the finished jobs' statistics into o->stats (usage counts every
 * candidate, also those best_of drops). */
void api_out_sum_stats(api_out *o);
/* The complete (non-streamed) body of finished jobs. */
json_t *api_out_body(api_out *o, const gen_req *g);
/* Stream the choices; takes ownership of o (malloc'd). */
int api_out_stream(srv_req *r, api_out *o);
/* The error response of a failed job. */
int api_send_job_error(srv_req *r, srv_job *j);

#endif
