/*
 * arch.c - the architecture table (see arch.h).
 *
 * Facts per row: gguf-and-architectures.md §5-§8 and §10, qwen35-hybrid.md.
 */
#include <stdio.h>
#include <string.h>

#include "model.h"

static const bd_arch_info arch_table[] = {
    {.name = "llama", .id = BD_ARCH_LLAMA, .role = BD_ROLE_TARGET, .family = "Llama 2 / 3.x (dense; Llama 3.1+ rope_freqs scaling)",
     .rope = BD_ROPE_NORM, .load = bd_load_dense, .forward = bd_forward_dense},
    {.name = "qwen3", .id = BD_ARCH_QWEN3, .role = BD_ROLE_TARGET, .family = "Qwen3 (dense)",
     .rope = BD_ROPE_NEOX, .qk_norm = true, .load = bd_load_dense, .forward = bd_forward_dense},
    {.name = "qwen35", .id = BD_ARCH_QWEN35, .role = BD_ROLE_TARGET,
     .family = "Qwen3.5/3.6 hybrid (Gated DeltaNet + gated attention)", .rope = BD_ROPE_IMROPE, .qk_norm = true,
     .recurrent = true, .load = bd_load_qwen35, .forward = bd_forward_qwen35},
    {.name = "qwen35moe", .id = BD_ARCH_QWEN35MOE, .role = BD_ROLE_TARGET,
     .family = "Qwen3.5/3.6 hybrid mixture-of-experts", .rope = BD_ROPE_IMROPE, .qk_norm = true,
     .recurrent = true, .moe = true, .moe_shared_expert = true, .moe_fused_gate_up = true, .load = bd_load_qwen35,
     .forward = bd_forward_qwen35},
    {.name = "qwen2", .id = BD_ARCH_QWEN2, .role = BD_ROLE_TARGET,
     .family = "Qwen2 / Qwen2.5 (dense, q/k/v biases)", .rope = BD_ROPE_NEOX, .load = bd_load_dense,
     .forward = bd_forward_dense},
    {.name = "qwen3moe", .id = BD_ARCH_QWEN3MOE, .role = BD_ROLE_TARGET, .family = "Qwen3 mixture-of-experts",
     .rope = BD_ROPE_NEOX, .qk_norm = true, .moe = true, .load = bd_load_dense, .forward = bd_forward_dense},
    {.name = "qwen3next", .id = BD_ARCH_QWEN3NEXT, .role = BD_ROLE_TARGET,
     .family = "Qwen3-Next hybrid mixture-of-experts (grouped V-head order)", .rope = BD_ROPE_NEOX,
     .qk_norm = true, .recurrent = true, .moe = true, .moe_shared_expert = true, .moe_fused_gate_up = true,
     .gdn_v_grouped = true, .load = bd_load_qwen35, .forward = bd_forward_qwen35},
    {.name = "dflash", .id = BD_ARCH_DFLASH, .role = BD_ROLE_DRAFTER,
     .family = "DFlash block drafter (llama.cpp upstream schema)", .rope = BD_ROPE_NEOX, .qk_norm = true,
     .load = bd_dflash_load},
    {.name = "dflash-draft", .id = BD_ARCH_DFLASH_FORK, .role = BD_ROLE_DRAFTER,
     .family = "DFlash drafter in a llama.cpp fork's schema",
     .unsupported = "it is a llama.cpp fork's DFlash schema, which neither blockdraft nor upstream "
                    "llama.cpp loads; convert the drafter with upstream llama.cpp's converter "
                    "(architecture 'dflash', key 'dflash.target_layers')",
     .rope = BD_ROPE_NEOX},
};

#define N_ARCH ((int)(sizeof arch_table / sizeof arch_table[0]))

const bd_arch_info *bd_arch_find(const char *name) {
    for (int i = 0; name && i < N_ARCH; i++)
        if (!strcmp(arch_table[i].name, name)) return &arch_table[i];
    return NULL;
}

int bd_arch_count(void) { return N_ARCH; }

const bd_arch_info *bd_arch_at(int i) { return i >= 0 && i < N_ARCH ? &arch_table[i] : NULL; }

const char *bd_arch_list(enum bd_arch_role role, char *buf, size_t n) {
    size_t used = 0;
    if (n) buf[0] = '\0';
    for (int i = 0; i < N_ARCH; i++) {
        const bd_arch_info *a = &arch_table[i];
        if (a->role != role || a->unsupported) continue;
        int w = snprintf(buf + used, n > used ? n - used : 0, "%s%s", used ? ", " : "", a->name);
        if (w < 0 || (size_t)w >= n - used) break;
        used += (size_t)w;
    }
    return buf;
}

const char *bd_arch_target_problem(const char *name, char *buf, size_t n) {
    char list[160];
    bd_arch_list(BD_ROLE_TARGET, list, sizeof list);
    const bd_arch_info *a = bd_arch_find(name);
    if (!a)
        snprintf(buf, n, "architecture '%s' is not supported by blockdraft (supported targets: %s)", name, list);
    else if (a->role == BD_ROLE_DRAFTER)
        snprintf(buf, n, "architecture '%s' is a DFlash drafter, not a target model", name);
    else if (a->unsupported)
        snprintf(buf, n, "architecture '%s' (%s) is not supported by this build: %s (supported targets: %s)", name,
                 a->family, a->unsupported, list);
    else
        return NULL;
    return buf;
}
