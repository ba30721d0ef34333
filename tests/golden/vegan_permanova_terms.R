# adonis2 on the cases tests/test_permanova_terms.py writes, run live (R vegan 2.6).
# Usage: Rscript tests/golden/vegan_permanova_terms.R CASE_DIR...
# Each CASE_DIR holds distances.csv (square, no header), factors.csv (a header; every column a factor, the
# column ".strata" the blocks when present), model.txt (line 1: the right-hand side of the formula, line 2: by)
# and permutations.csv (1-based rows of the permutation matrix given to adonis2; absent: no permutations).
# Writes CASE_DIR/adonis2.csv: term, Df, SumOfSqs, R2, F, P (17 significant digits).
suppressPackageStartupMessages(library(vegan))

for (dir in commandArgs(trailingOnly = TRUE)) {
  d <- as.dist(as.matrix(read.csv(file.path(dir, "distances.csv"), header = FALSE)))
  data <- read.csv(file.path(dir, "factors.csv"), colClasses = "character", check.names = FALSE)
  strata <- NULL
  if (".strata" %in% names(data)) {
    strata <- factor(data[[".strata"]])
    data[[".strata"]] <- NULL
  }
  for (name in names(data)) data[[name]] <- factor(data[[name]])
  model <- readLines(file.path(dir, "model.txt"))
  perm_path <- file.path(dir, "permutations.csv")
  perms <- if (file.exists(perm_path)) as.matrix(read.csv(perm_path, header = FALSE)) else 0
  out <- adonis2(as.formula(paste("d ~", model[1])), data = data, by = model[2], permutations = perms,
                 strata = strata)
  write.csv(data.frame(term = rownames(out), Df = out$Df, SumOfSqs = sprintf("%.17g", out$SumOfSqs),
                       R2 = sprintf("%.17g", out$R2), F = sprintf("%.17g", out$F), P = sprintf("%.17g", out[["Pr(>F)"]])),
            file.path(dir, "adonis2.csv"), row.names = FALSE)
}
