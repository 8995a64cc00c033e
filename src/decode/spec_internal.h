/*
 * spec_internal.h - test hooks of the speculative driver. Not part of the
 * public API.
 */
#ifndef BD_SPEC_INTERNAL_H
#define BD_SPEC_INTERNAL_H

#include <stdbool.h>

/* When set, the sampling acceptance rule is replaced by a deliberately
 * wrong one (accept a draft whenever its target probability exceeds 0.1,
 * otherwise resample without it). Exists only so the statistical test of
 * losslessness can show it has the power to reject a wrong rule. */
extern bool bd_spec_test_wrong_rule;

#endif
