// olaf-cli: see src/cli/olaf_cli.h.
#include <iostream>

#include "cli/olaf_cli.h"

int main(int argc, char** argv) {
  return inca::cli::RunOlafCli(argc, argv, std::cout, std::cerr);
}
