// opconform's reference registry: include this one header (see reference/README.md).
#pragma once

#include "opconform/reference/op_info.h"
#include "opconform/reference/reference.h"
