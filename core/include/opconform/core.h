// opconform/core.h — the operator model in one include: tensors, DLPack, schemas, boxed
// values, dispatch keys, the registry and Library.
#pragma once

#include "opconform/core/cuda.h"
#include "opconform/core/device.h"
#include "opconform/core/dispatch_key.h"
#include "opconform/core/dlpack.h"
#include "opconform/core/dtype.h"
#include "opconform/core/error.h"
#include "opconform/core/ivalue.h"
#include "opconform/core/kernel.h"
#include "opconform/core/layout.h"
#include "opconform/core/library.h"
#include "opconform/core/registry.h"
#include "opconform/core/scalar.h"
#include "opconform/core/schema.h"
#include "opconform/core/storage.h"
#include "opconform/core/tag.h"
#include "opconform/core/tensor.h"
