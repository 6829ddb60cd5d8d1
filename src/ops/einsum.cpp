// nuvec: einsum and einsum_path (MLX's signatures, NumPy's subscript semantics): parse the
// subscripts, take diagonals of repeated labels, sum labels used once, then contract pairs
// greedily (smallest intermediate first) with transpose/reshape/matmul, so the rules of
// those ops give einsum its derivatives and batching.
#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <tuple>
#include <sstream>

#include "ops/ops_common.h"

namespace nuvec {

namespace {

using Labels = std::string; // one char per axis; ellipsis axes use chars 1, 2, ...

struct Parsed {
  std::vector<Labels> inputs;
  Labels output;
  std::map<char, int> sizes;
};

bool is_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// A term's letters with "..." replaced by '.', checking the characters.
std::string scan_term(const char* op, const std::string& term, const std::string& subscripts) {
  std::string out;
  bool ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    if (term.compare(i, 3, "...") == 0) {
      if (ellipsis) throw_invalid_argument(op, "each term must hold at most one ellipsis; got '", subscripts, "'.");
      ellipsis = true;
      out.push_back('.');
      i += 2;
    } else if (is_letter(term[i])) {
      out.push_back(term[i]);
    } else {
      throw_invalid_argument(
          op, "subscripts must be letters, ',', '->' or '...'; got '", term[i], "' in '", subscripts, "'.");
    }
  }
  return out;
}

// The labels of one term for an operand of `ndim` axes; ellipsis axes are labelled
// right-aligned among `ell` broadcast labels (chars 1..ell).
Labels expand_term(const std::string& term, int ndim, int ell) {
  Labels out;
  int letters = static_cast<int>(std::count_if(term.begin(), term.end(), is_letter));
  for (char c : term) {
    if (c != '.') {
      out.push_back(c);
      continue;
    }
    int e = ndim - letters;
    for (int j = ell - e; j < ell; ++j) out.push_back(static_cast<char>(1 + j));
  }
  return out;
}

Parsed parse(const char* op, const std::string& subscripts_in, const std::vector<array>& operands) {
  std::string subscripts;
  for (char c : subscripts_in) {
    if (c != ' ') subscripts.push_back(c);
  }
  std::string lhs = subscripts, rhs;
  bool explicit_out = false;
  if (auto arrow = subscripts.find("->"); arrow != std::string::npos) {
    explicit_out = true;
    lhs = subscripts.substr(0, arrow);
    rhs = subscripts.substr(arrow + 2);
    if (rhs.find("->") != std::string::npos) throw_invalid_argument(op, "subscripts must hold at most one '->'; got '", subscripts_in, "'.");
  }
  std::vector<std::string> terms;
  std::stringstream ss(lhs);
  for (std::string t; std::getline(ss, t, ',');) terms.push_back(scan_term(op, t, subscripts_in));
  if (!lhs.empty() && lhs.back() == ',') terms.push_back("");
  if (terms.size() != operands.size()) {
    throw_invalid_argument(
        op, "the number of terms must equal the number of operands (", operands.size(), "); got ",
        terms.size(), " in '", subscripts_in, "'.");
  }
  if (operands.empty()) throw_invalid_argument(op, "at least one operand must be given; got none.");
  int ell = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    int letters = static_cast<int>(std::count_if(terms[i].begin(), terms[i].end(), is_letter));
    bool has_ell = terms[i].find('.') != std::string::npos;
    int nd = static_cast<int>(operands[i].ndim());
    if (letters > nd || (!has_ell && letters != nd)) {
      throw_invalid_argument(
          op, "term ", i, " ('", terms[i], "') must label every axis of operand ", i, "; got shape ",
          operands[i].shape(), ".");
    }
    if (has_ell) ell = std::max(ell, nd - letters);
  }
  Parsed p;
  for (size_t i = 0; i < terms.size(); ++i) {
    Labels l = expand_term(terms[i], static_cast<int>(operands[i].ndim()), ell);
    for (size_t ax = 0; ax < l.size(); ++ax) {
      int d = operands[i].shape(static_cast<int>(ax));
      auto [it, fresh] = p.sizes.emplace(l[ax], d);
      if (!fresh && it->second != d) {
        if (it->second == 1) {
          it->second = d;
        } else if (d != 1) {
          throw_invalid_argument(
              op, "sizes of a label must agree (or be 1); got ", it->second, " and ", d, " for '",
              l[ax] < 32 ? std::string("...") : std::string(1, l[ax]), "'.");
        }
      }
    }
    p.inputs.push_back(std::move(l));
  }
  // Implicit output: the letters occurring once in all terms together (NumPy's rule, so a
  // label repeated inside one term, "ii", is summed), in character order.
  std::map<char, int> occurrences;
  for (auto& l : p.inputs) {
    for (char c : l) occurrences[c]++;
  }
  if (explicit_out) {
    std::string out_term = scan_term(op, rhs, subscripts_in);
    for (char c : out_term) {
      if (c == '.') {
        for (int j = 0; j < ell; ++j) p.output.push_back(static_cast<char>(1 + j));
        continue;
      }
      if (!p.sizes.count(c)) throw_invalid_argument(op, "output label '", c, "' must appear in an input; got '", subscripts_in, "'.");
      if (p.output.find(c) != std::string::npos) throw_invalid_argument(op, "output labels must be unique; got '", subscripts_in, "'.");
      p.output.push_back(c);
    }
  } else {
    for (int j = 0; j < ell; ++j) p.output.push_back(static_cast<char>(1 + j));
    for (auto& [c, n] : occurrences) {
      if (c >= 32 && n == 1) p.output.push_back(c);
    }
  }
  return p;
}

int64_t size_of_labels(const Labels& l, const std::map<char, int>& sizes) {
  int64_t n = 1;
  for (char c : l) n *= sizes.at(c);
  return n;
}

bool has(const Labels& l, char c) {
  return l.find(c) != std::string::npos;
}

// Labels that some operand other than i and j, or the output, still needs.
std::set<char> needed_outside(const std::vector<Labels>& ops, size_t i, size_t j, const Labels& output) {
  std::set<char> s(output.begin(), output.end());
  for (size_t k = 0; k < ops.size(); ++k) {
    if (k != i && k != j) s.insert(ops[k].begin(), ops[k].end());
  }
  return s;
}

// The labels left after contracting a and b: shared ones needed later (batch), then a's,
// then b's own.
struct PairPlan {
  Labels batch, a_only, b_only, contracted;
  Labels result() const { return batch + a_only + b_only; }
};

PairPlan plan_pair(const Labels& a, const Labels& b, const std::set<char>& needed) {
  PairPlan p;
  for (char c : a) {
    if (has(b, c)) {
      (needed.count(c) ? p.batch : p.contracted).push_back(c);
    } else if (needed.count(c)) {
      p.a_only.push_back(c);
    }
  }
  for (char c : b) {
    if (!has(a, c) && needed.count(c)) p.b_only.push_back(c);
  }
  return p;
}

// Labels of one operand after diagonals (unique, first-occurrence order) and after summing
// labels needed nowhere else.
Labels reduced_labels(const std::vector<Labels>& ops, size_t i, const Labels& output) {
  auto needed = needed_outside(ops, i, i, output);
  Labels out;
  for (char c : ops[i]) {
    if (!has(out, c) && needed.count(c)) out.push_back(c);
  }
  return out;
}

struct Plan {
  std::vector<Labels> start; // per operand, after its own reductions
  std::vector<std::pair<int, int>> steps;
};

// The contraction order of NumPy's greedy einsum_path (numpy/core/einsumfunc.py, which MLX's
// einsum_path follows): among pairs sharing a label (outer products only when no pair
// does), take the one that removes the most elements, then the fewest flops; skip pairs
// whose result outgrows the largest operand or output, or whose running cost passes the
// naive one-shot cost. Costs use each operand's full label set.
std::vector<std::pair<int, int>> greedy_order(const Parsed& p) {
  using Set = std::set<char>;
  auto size_of = [&](const Set& labels) {
    int64_t n = 1;
    for (char c : labels) n *= p.sizes.at(c);
    return n;
  };
  std::vector<Set> sets;
  for (auto& l : p.inputs) sets.emplace_back(l.begin(), l.end());
  const Set out_set(p.output.begin(), p.output.end());
  const size_t n_in = sets.size();
  if (n_in <= 1) return {};
  if (n_in == 2) return {{0, 1}};
  int64_t memory_limit = size_of(out_set);
  for (auto& st : sets) memory_limit = std::max(memory_limit, size_of(st));
  // The labels of contracting `pos` together, what remains, and the flop count.
  struct Contraction {
    Set result, removed, all;
    std::vector<Set> remaining; // the other operands, then the result
  };
  auto contract = [&](const std::vector<Set>& in, std::vector<size_t> pos) {
    Contraction c;
    Set remain = out_set;
    for (size_t k = 0; k < in.size(); ++k) {
      if (std::find(pos.begin(), pos.end(), k) != pos.end()) {
        c.all.insert(in[k].begin(), in[k].end());
      } else {
        c.remaining.push_back(in[k]);
        remain.insert(in[k].begin(), in[k].end());
      }
    }
    for (char ch : c.all) (remain.count(ch) ? c.result : c.removed).insert(ch);
    c.remaining.push_back(c.result);
    return c;
  };
  auto flops = [&](const Contraction& c, size_t terms) {
    int64_t factor = std::max<int64_t>(1, static_cast<int64_t>(terms) - 1) + (c.removed.empty() ? 0 : 1);
    return size_of(c.all) * factor;
  };
  std::vector<size_t> everyone(n_in);
  for (size_t k = 0; k < n_in; ++k) everyone[k] = k;
  const int64_t naive_cost = flops(contract(sets, everyone), n_in);
  struct Candidate {
    int64_t neg_removed, cost;
    std::pair<size_t, size_t> pos;
    std::vector<Set> sets_after;
  };
  int64_t path_cost = 0;
  auto consider = [&](size_t x, size_t y, std::vector<Candidate>& out) {
    auto c = contract(sets, {x, y});
    int64_t new_size = size_of(c.result);
    if (new_size > memory_limit) return;
    int64_t removed = size_of(sets[x]) + size_of(sets[y]) - new_size;
    int64_t cost = flops(c, 2);
    if (path_cost + cost > naive_cost) return;
    out.push_back({-removed, cost, {x, y}, std::move(c.remaining)});
  };
  std::vector<Candidate> known;
  std::vector<std::pair<size_t, size_t>> pairs;
  for (size_t x = 0; x < n_in; ++x) {
    for (size_t y = x + 1; y < n_in; ++y) pairs.emplace_back(x, y);
  }
  auto disjoint = [](const Set& a, const Set& b) {
    for (char c : a) if (b.count(c)) return false;
    return true;
  };
  std::vector<std::pair<int, int>> order;
  for (size_t it = 0; it + 1 < n_in; ++it) {
    for (auto [x, y] : pairs) {
      if (!disjoint(sets[x], sets[y])) consider(x, y, known);
    }
    if (known.empty()) {
      for (size_t x = 0; x < sets.size(); ++x) {
        for (size_t y = x + 1; y < sets.size(); ++y) consider(x, y, known);
      }
      if (known.empty()) break; // the caller contracts the rest left to right
    }
    auto best_it = std::min_element(known.begin(), known.end(), [](const Candidate& a, const Candidate& b) {
      return std::tie(a.neg_removed, a.cost) < std::tie(b.neg_removed, b.cost);
    });
    Candidate best = *best_it;
    auto [bx, by] = best.pos;
    // Keep the other known contractions, renumbered for the operand list after this step.
    std::vector<Candidate> kept;
    for (auto& c : known) {
      auto [x, y] = c.pos;
      if (x == bx || x == by || y == bx || y == by) continue;
      auto& cs = c.sets_after;
      cs.erase(cs.begin() + (by - (by > x) - (by > y)));
      cs.erase(cs.begin() + (bx - (bx > x) - (bx > y)));
      cs.insert(cs.end() - 1, best.sets_after.back());
      c.pos = {x - (x > bx) - (x > by), y - (y > bx) - (y > by)};
      kept.push_back(std::move(c));
    }
    known = std::move(kept);
    sets = best.sets_after;
    pairs.clear();
    for (size_t k = 0; k + 1 < sets.size(); ++k) pairs.emplace_back(k, sets.size() - 1);
    order.emplace_back(static_cast<int>(bx), static_cast<int>(by));
    path_cost += best.cost;
  }
  return order;
}

Plan make_plan(const Parsed& p) {
  Plan plan;
  for (size_t i = 0; i < p.inputs.size(); ++i) plan.start.push_back(reduced_labels(p.inputs, i, p.output));
  std::vector<Labels> ops = plan.start;
  auto order = greedy_order(p);
  // Pairs in the greedy order, then (if the greedy search stopped early) left to right.
  for (size_t step = 0; ops.size() > 1; ++step) {
    std::pair<int, int> pick = step < order.size() ? order[step] : std::pair<int, int>{0, 1};
    auto [i, j] = pick;
    auto pp = plan_pair(ops[i], ops[j], needed_outside(ops, i, j, p.output));
    ops.erase(ops.begin() + j);
    ops.erase(ops.begin() + i);
    ops.push_back(pp.result());
    plan.steps.push_back(pick);
  }
  return plan;
}

std::string show(const Labels& l) {
  std::string s;
  bool ell = false;
  for (char c : l) {
    if (c < 32) {
      if (!ell) s += "...";
      ell = true;
    } else {
      s.push_back(c);
    }
  }
  return s;
}

std::vector<int> positions(const Labels& from, const Labels& to) {
  std::vector<int> perm;
  for (char c : to) perm.push_back(static_cast<int>(from.find(c)));
  return perm;
}

// Takes diagonals of repeated labels, broadcasts size-1 axes to the label sizes and sums the
// labels not kept, leaving x labelled by `keep` (in that order).
array prepare(array x, Labels l, const Labels& keep, const std::map<char, int>& sizes, StreamOrDevice s) {
  for (size_t i = 0; i < l.size(); ++i) {
    size_t j = l.find(l[i], i + 1);
    while (j != std::string::npos) {
      // diagonal() removes both axes and appends the diagonal last.
      char c = l[i];
      x = diagonal(x, 0, static_cast<int>(i), static_cast<int>(j), s);
      l.erase(j, 1);
      l.erase(i, 1);
      l.push_back(c);
      i = static_cast<size_t>(-1);
      break;
    }
  }
  Shape full;
  for (char c : l) full.push_back(sizes.at(c));
  if (full != x.shape()) x = broadcast_to(x, full, s);
  std::vector<int> drop;
  for (size_t i = 0; i < l.size(); ++i) {
    if (!has(keep, l[i])) drop.push_back(static_cast<int>(i));
  }
  if (!drop.empty()) {
    x = sum(x, drop, false, s);
    Labels rest;
    for (char c : l) {
      if (has(keep, c)) rest.push_back(c);
    }
    l = rest;
  }
  if (l != keep) x = transpose(x, positions(l, keep), s);
  return x;
}

array contract(const array& a, const Labels& la, const array& b, const Labels& lb, const PairPlan& pp, const std::map<char, int>& sizes, StreamOrDevice s) {
  auto prod = [&](const Labels& l) {
    int n = 1;
    for (char c : l) n *= sizes.at(c);
    return n;
  };
  int nb = prod(pp.batch), m = prod(pp.a_only), n = prod(pp.b_only), k = prod(pp.contracted);
  array at = prepare(a, la, pp.batch + pp.a_only + pp.contracted, sizes, s);
  array bt = prepare(b, lb, pp.batch + pp.contracted + pp.b_only, sizes, s);
  array out = matmul(reshape(at, {nb, m, k}, s), reshape(bt, {nb, k, n}, s), s);
  Shape shape;
  for (char c : pp.result()) shape.push_back(sizes.at(c));
  return reshape(out, shape, s);
}

std::string describe(const std::string& subscripts, const Parsed& p, const Plan& plan) {
  std::ostringstream os;
  os << "einsum_path: " << subscripts << "\n";
  std::vector<Labels> ops = plan.start;
  for (size_t st = 0; st < plan.steps.size(); ++st) {
    auto [i, j] = plan.steps[st];
    auto pp = plan_pair(ops[i], ops[j], needed_outside(ops, i, j, p.output));
    Labels all = pp.batch + pp.a_only + pp.b_only + pp.contracted;
    os << "  step " << st << ": (" << i << ", " << j << ") " << show(ops[i]) << "," << show(ops[j])
       << "->" << show(pp.result()) << "  multiply-adds " << size_of_labels(all, p.sizes) << "\n";
    Labels r = pp.result();
    ops.erase(ops.begin() + j);
    ops.erase(ops.begin() + i);
    ops.push_back(r);
  }
  return os.str();
}

} // namespace

std::pair<std::vector<std::vector<int>>, std::string> einsum_path(
    const std::string& subscripts,
    const std::vector<array>& operands) {
  Parsed p = parse("einsum_path", subscripts, operands);
  Plan plan = make_plan(p);
  std::vector<std::vector<int>> path;
  if (plan.steps.empty()) path.push_back({0});
  for (auto [i, j] : plan.steps) path.push_back({i, j});
  return {path, describe(subscripts, p, plan)};
}

array einsum(const std::string& subscripts, const std::vector<array>& operands, StreamOrDevice s) {
  Parsed p = parse("einsum", subscripts, operands);
  Plan plan = make_plan(p);
  std::vector<array> ops;
  std::vector<Labels> labels = plan.start;
  for (size_t i = 0; i < operands.size(); ++i) {
    ops.push_back(prepare(operands[i], p.inputs[i], plan.start[i], p.sizes, s));
  }
  for (auto [i, j] : plan.steps) {
    auto pp = plan_pair(labels[i], labels[j], needed_outside(labels, i, j, p.output));
    array r = contract(ops[i], labels[i], ops[j], labels[j], pp, p.sizes, s);
    ops.erase(ops.begin() + j);
    ops.erase(ops.begin() + i);
    labels.erase(labels.begin() + j);
    labels.erase(labels.begin() + i);
    ops.push_back(r);
    labels.push_back(pp.result());
  }
  return prepare(ops[0], labels[0], p.output, p.sizes, s);
}

} // namespace nuvec
