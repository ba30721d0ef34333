# Golden values for stats_core's PERMANOVA and PERMDISP, computed with R vegan (adonis2, betadisper + permutest).
# Usage: Rscript tests/golden/vegan_golden.R tests/golden/vegan_golden.json
# Inputs are generated without random numbers (integer formulas) and written next to the results, so the
# Python tests read exactly what R saw. Only the permutation p-values depend on R's RNG (set.seed below).
suppressPackageStartupMessages(library(vegan))

out_path <- commandArgs(trailingOnly = TRUE)[1]
num <- function(x) paste0("[", paste(sprintf("%.17g", x), collapse = ", "), "]")
str_vec <- function(x) paste0("[", paste0('"', x, '"', collapse = ", "), "]")

make_case <- function(name, x, groups, method) {
  d <- vegdist(x, method = method)
  set.seed(20240601)
  a <- adonis2(d ~ groups, permutations = 999)
  bd <- betadisper(d, groups, type = "centroid")
  set.seed(20240601)
  pt <- permutest(bd, permutations = 999)
  eig_negative <- sum(bd$eig < 0)
  paste0(
    '"', name, '": {',
    '"method": "', method, '", ',
    '"n": ', nrow(x), ', ',
    '"distances": ', num(as.vector(d)), ', ',
    '"groups": ', str_vec(as.character(groups)), ', ',
    '"adonis2_F": ', sprintf("%.17g", a$F[1]), ', ',
    '"adonis2_R2": ', sprintf("%.17g", a$R2[1]), ', ',
    '"adonis2_p": ', sprintf("%.17g", a$`Pr(>F)`[1]), ', ',
    '"betadisper_distances": ', num(bd$distances), ', ',
    '"betadisper_negative_eigenvalues": ', eig_negative, ', ',
    '"permutest_F": ', sprintf("%.17g", pt$tab$F[1]), ', ',
    '"permutest_p": ', sprintf("%.17g", pt$tab$`Pr(>F)`[1]),
    '}'
  )
}

# Case 1: Euclidean distances, 24 objects in three unbalanced groups (10, 8, 6), 5 features.
i <- 1:24
x1 <- sapply(1:5, function(j) ((i * (2 * j + 5) + j * j) %% 17) / 3)
x1[11:18, 2] <- x1[11:18, 2] + 2.5
x1[19:24, ] <- x1[19:24, ] * 1.8
g1 <- factor(rep(c("alpha", "beta", "gamma"), times = c(10, 8, 6)))

# Case 2: Bray-Curtis (non-Euclidean: negative PCoA eigenvalues), 30 objects, two groups (18, 12), 6 features.
k <- 1:30
x2 <- sapply(1:6, function(j) ((k * (3 * j + 1) + 7 * j) %% 11) + 1)
x2[19:30, c(1, 4)] <- x2[19:30, c(1, 4)] * 3
g2 <- factor(rep(c("shuffled", "plain"), times = c(18, 12)))

cat(
  "{", '"vegan_version": "', as.character(packageVersion("vegan")), '", ',
  '"permutations": 999, ',
  make_case("euclidean_three_groups", x1, g1, "euclidean"), ", ",
  make_case("braycurtis_two_groups", x2, g2, "bray"),
  "}\n",
  sep = "", file = out_path
)
