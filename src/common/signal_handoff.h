/* Eventfd signals a busy thread hands to a thread that spins idle, which writes them instead. */
#ifndef FERRY_SIGNAL_HANDOFF_H
#define FERRY_SIGNAL_HANDOFF_H

#include <stdbool.h>

/*
 * Waking a sleeping reader through an eventfd keeps the writer in the
 * kernel for the wake-up (an interrupt to the reader's CPU, and the woken
 * driver may take the writer's own CPU). A thread that spins for its next
 * job (the large-read helper) has that time to spare: while it spins, a
 * queue thread hands it the call to its driver and goes on with the next
 * request. One spinner serves the process at a time; every signal handed
 * over is written, none twice.
 */

/* The spinner: takes the role, true if no other thread has it. */
bool signal_handoff_open(void);
/* The spinner, as it spins: writes the signal handed over, if any. */
void signal_handoff_serve(void);
/* The spinner, before it works or sleeps: writes what is handed over
 * and takes no more. */
void signal_handoff_close(void);

/* Any thread: hands a 1 to be written to eventfd fd; false when nobody
 * spins to take it, and the caller writes it itself. */
bool signal_handoff_post(int fd);
/* Before fd is closed or replaced: returns once a signal handed over for
 * it is written. The caller must keep fd from being handed over again
 * meanwhile (the queue's lock). */
void signal_handoff_forget(int fd);

#endif
