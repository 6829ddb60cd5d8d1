// What the example trainers (nuvec-mnist, nuvec-lm train) share for reporting: a one-line
// progress bar redrawn with a carriage return, and PNG plots of a CSV through gnuplot.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <string>

namespace nuvec::examples {

// Draws "\r<prefix> [=====>    ]  40%  <suffix>" on stdout (no newline).
inline void draw_progress(const std::string& prefix, int64_t done, int64_t total, const std::string& suffix) {
  constexpr int kWidth = 30;
  const int filled = total > 0 ? static_cast<int>(done * kWidth / total) : kWidth;
  std::cout << "\r" << prefix << " [" << std::string(filled, '=') << (filled < kWidth ? ">" : "")
            << std::string(std::max(0, kWidth - filled - 1), ' ') << "] " << std::setw(3)
            << (total > 0 ? 100 * done / total : 100) << "%  " << suffix << "   " << std::flush;
}

inline bool have_gnuplot() {
  return std::system("command -v gnuplot >/dev/null 2>&1") == 0;
}

// Runs gnuplot on `plot` (the script's lines after the terminal and output settings) to draw
// `png` from `csv`; the script is kept next to the PNG (<png without .png>.gp). Says on
// stdout what it did: the PNG, or why there is none (the CSV stays the record).
inline void write_plot(const std::string& csv, const std::string& png, const std::string& plot) {
  if (!have_gnuplot()) {
    std::cout << "gnuplot not found, so no PNG plot (sudo apt-get install gnuplot-nox); "
                 "the learning curve is in "
              << csv << "\n";
    return;
  }
  const std::string script = png.substr(0, png.size() - 4) + ".gp";
  {
    std::ofstream g(script, std::ios::trunc);
    g << "set terminal pngcairo size 900,540 noenhanced\n"
         "set output '"
      << png << "'\n"
      << plot;
  }
  const std::string cmd = "gnuplot '" + script + "' 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    // pngcairo may be missing from minimal gnuplot builds; the plain png terminal is not.
    std::string fallback = "sed -i 's/pngcairo/png/' '" + script + "' && " + cmd;
    if (std::system(fallback.c_str()) != 0) {
      std::cout << "gnuplot failed; the learning curve is in " << csv << "\n";
      return;
    }
  }
  std::cout << "plot: " << png << "\n";
}

} // namespace nuvec::examples
