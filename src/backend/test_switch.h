/* Switches only a test build of the backend has (FERRY_TEST_HOOKS): in the daemon's build neither the field nor a branch on it exists. */
#ifndef FERRY_TEST_SWITCH_H
#define FERRY_TEST_SWITCH_H

#include <stdatomic.h>
#include <stdbool.h>

/*
 * Declare the field as `test_switch name;` inside #ifdef FERRY_TEST_HOOKS,
 * and read it with test_switch_on(obj->name) anywhere: without the define
 * the macro is false and its argument is never compiled, so the request
 * path has no branch for it. Relaxed: a test flips a switch between
 * requests, not inside one.
 */
#ifdef FERRY_TEST_HOOKS
typedef atomic_bool test_switch;
#define test_switch_on(sw) atomic_load_explicit(&(sw), memory_order_relaxed)
#define test_switch_set(sw, on) atomic_store_explicit(&(sw), (on), memory_order_relaxed)
#else
#define test_switch_on(sw) false
#define test_switch_set(sw, on) ((void)0)
#endif

#endif
