/*
 * pe_signal_internal.h - private to kernels/signal/: the integer log's
 * correction table (generated, pe_signal_log_table.c).
 */
#ifndef PYEMBED_PE_SIGNAL_INTERNAL_H
#define PYEMBED_PE_SIGNAL_INTERNAL_H

#include <stdint.h>

#define PE_SIGNAL_LOG_NODES 130
extern const uint16_t pe_signal_log_table[PE_SIGNAL_LOG_NODES];

#endif /* PYEMBED_PE_SIGNAL_INTERNAL_H */
