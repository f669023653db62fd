/*-------------------------------------------------------------------------
 *
 * entry_list.h
 *	  The holders and waiters lists of a workload slot.
 *
 * Permit entries are linked by their index in bulkhead_shared->entries
 * rather than by pointers: two 4-byte links instead of a 16-byte dlist_node
 * keep an entry at 32 bytes, so a backend's eight entries fit in 256 bytes.
 * The caller holds the slot's lock exclusively for every change, and at
 * least shared to walk a list (see shmem.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef BULKHEAD_ENTRY_LIST_H
#define BULKHEAD_ENTRY_LIST_H

#include "shmem/shmem.h"

static inline int32
entry_index(BulkheadEntry *entry)
{
	return (int32) (entry - bulkhead_shared->entries);
}

static inline BulkheadEntry *
entry_at(int32 index)
{
	return &bulkhead_shared->entries[index];
}

static inline void
entry_list_init(BulkheadEntryList *list)
{
	list->head = BULKHEAD_NO_ENTRY;
	list->tail = BULKHEAD_NO_ENTRY;
}

static inline bool
entry_list_is_empty(const BulkheadEntryList *list)
{
	return list->head == BULKHEAD_NO_ENTRY;
}

static inline void
entry_list_push_tail(BulkheadEntryList *list, BulkheadEntry *entry)
{
	int32		index = entry_index(entry);

	entry->prev = list->tail;
	entry->next = BULKHEAD_NO_ENTRY;
	if (list->tail == BULKHEAD_NO_ENTRY)
		list->head = index;
	else
		entry_at(list->tail)->next = index;
	list->tail = index;
}

/* Unlink entry, which must be in list */
static inline void
entry_list_delete(BulkheadEntryList *list, BulkheadEntry *entry)
{
	if (entry->prev == BULKHEAD_NO_ENTRY)
		list->head = entry->next;
	else
		entry_at(entry->prev)->next = entry->next;
	if (entry->next == BULKHEAD_NO_ENTRY)
		list->tail = entry->prev;
	else
		entry_at(entry->next)->prev = entry->prev;
	entry->prev = BULKHEAD_NO_ENTRY;
	entry->next = BULKHEAD_NO_ENTRY;
}

/* Walk a list; the body may not unlink the current entry */
#define entry_list_foreach(entry, list) \
	for ((entry) = (list)->head == BULKHEAD_NO_ENTRY ? NULL : entry_at((list)->head); \
		 (entry) != NULL; \
		 (entry) = (entry)->next == BULKHEAD_NO_ENTRY ? NULL : entry_at((entry)->next))

#endif							/* BULKHEAD_ENTRY_LIST_H */
