/* Copyright © 2023-2024 Apple Inc. */

#ifndef MLX_HALF_H
#define MLX_HALF_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__ARM_FEATURE_FP16_SCALAR_ARITHMETIC) || defined(__aarch64__)
#define HAS_FLOAT16
#include <arm_fp16.h>
typedef __fp16 float16_t;
#endif

#if defined(__ARM_FEATURE_BF16) || defined(__aarch64__)
#define HAS_BFLOAT16
#include <arm_bf16.h>
typedef __bf16 bfloat16_t;
#endif

/* Latency Explorer patch: x86_64 (MLX's Linux CPU build). mlx-rs calls the float16 and
 * bfloat16 accessors unconditionally, so declare them here too, with storage-only 16-bit
 * types of the same size: for bindgen (clang) float16_t is __fp16, which clang accepts on
 * every target as a storage format and binds as `__BindgenFloat16(u16)`, what mlx-rs
 * expects; bfloat16_t is the u16 mlx-rs expects. For the C++ compiler (GCC has no __fp16
 * on x86) float16_t is a struct holding the same 16 bits. The accessors only copy the bits
 * (`array::item<T>` and `array::data<T>` reinterpret the buffer). */
#if defined(__x86_64__) && !defined(HAS_FLOAT16)
#define HAS_FLOAT16
#define HAS_BFLOAT16
#include <stdint.h>
#if defined(__clang__)
typedef __fp16 float16_t;
#else
typedef struct {
  uint16_t bits;
} float16_t;
#endif
typedef uint16_t bfloat16_t;
#endif

#ifdef __cplusplus
}
#endif

#endif
