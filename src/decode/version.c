/*
 * version.c - the library's version (blockdraft.h: BD_VERSION_*).
 */
#include "blockdraft.h"

const char *bd_version(void) { return BD_VERSION_STRING; }
