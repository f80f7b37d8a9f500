// opconform: the command-line program (cli.h has everything; this passes argv on).
#include <string>
#include <vector>

#include "opconform/harness/cli.h"

int main(int argc, char** argv) {
  return opconform::harness::opconform_main(std::vector<std::string>(argv + 1, argv + argc));
}
