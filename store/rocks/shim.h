// Bridge between the Go package and its C++ FileSystem shim.

#ifndef GAZCONSUMER_STORE_ROCKS_SHIM_H
#define GAZCONSUMER_STORE_ROCKS_SHIM_H

#include <stdint.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

// gc_install_recorded_fs replaces the Env held by c_env, a rocksdb_env_t
// created by rocksdb_create_default_env, with an Env whose FileSystem records
// its file operations through the Go recorder behind handle. It returns NULL,
// or an error message to be freed by the caller.
char* gc_install_recorded_fs(void* c_env, uintptr_t handle);

#ifdef __cplusplus
}
#endif

#endif
