"""The C functions the SGLang backend calls per request, bound once.

Owns nothing: module-level names for the ctypes function objects (a
global load instead of two attribute lookups on each call) shared by
cache.py and _hostier.py.
"""
import ctypes as C

from .._ffi import lib

match = lib.rkv_tree_match
match_tiers = lib.rkv_tree_match_tiers
insert = lib.rkv_tree_insert
alloc_n = lib.rkv_pool_alloc_n
unref_n = lib.rkv_pool_unref_n
stats = lib.rkv_tree_get_stats
lock = lib.rkv_tree_lock
unlock = lib.rkv_tree_unlock
lock_counted = lib.rkv_tree_lock_counted
unlock_counted = lib.rkv_tree_unlock_counted
match_slots = lib.rkv_tree_match_slots
insert_slots = lib.rkv_tree_insert_slots
load = lib.rkv_tree_load
tier_poll = lib.rkv_tree_tier_poll
byref = C.byref
PEEK = 1  # rkv_tree_match flags
