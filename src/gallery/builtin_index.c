/*
 * builtin_index.c - gallery/index.yaml compiled into the binary, so that
 * `blockdraft pull NAME` works from any directory.
 *
 * The assembler resolves the path against the compiler's working
 * directory, which is the repository root for the Makefile and the test
 * builds. bd_builtin_index_end points one past the last byte; the text is
 * not NUL-terminated (a NUL follows, for safety, outside the range).
 */
__asm__(".section .rodata\n"
        ".global bd_builtin_index_start\n"
        ".global bd_builtin_index_end\n"
        ".balign 16\n"
        "bd_builtin_index_start:\n"
        ".incbin \"gallery/index.yaml\"\n"
        "bd_builtin_index_end:\n"
        ".byte 0\n"
        ".previous\n");
