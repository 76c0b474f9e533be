/*
 * pyembed.h - umbrella header: every public pyembed C API.
 */
#ifndef PYEMBED_PYEMBED_H
#define PYEMBED_PYEMBED_H

#include "pe_types.h"
#include "pe_fixed.h"
#include "pe_softmax.h"

#endif /* PYEMBED_PYEMBED_H */
