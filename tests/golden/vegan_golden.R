# Golden values for stats_core's PERMANOVA and PERMDISP, computed with R vegan (adonis2, betadisper + permutest).
# Usage: Rscript tests/golden/vegan_golden.R tests/golden/vegan_golden.json
# Inputs are generated without random numbers (integer formulas) and written next to the results, so the
# Python tests read exactly what R saw. Only the permutation p-values depend on R's RNG (set.seed below).
suppressPackageStartupMessages(library(vegan))

out_path <- commandArgs(trailingOnly = TRUE)[1]
num <- function(x) paste0("[", paste(sprintf("%.17g", x), collapse = ", "), "]")
str_vec <- function(x) paste0("[", paste0('"', x, '"', collapse = ", "), "]")

make_case <- function(name, x, groups, method, strata = NULL) {
  d <- vegdist(x, method = method)
  set.seed(20240601)
  a <- adonis2(d ~ groups, permutations = 999, strata = strata)
  bd <- betadisper(d, groups, type = "centroid")
  set.seed(20240601)
  pt <- permutest(bd, permutations = if (is.null(strata)) 999 else how(nperm = 999, blocks = strata))
  eig_negative <- sum(bd$eig < 0)
  blocked <- ""
  if (!is.null(strata)) {
    # the same test without blocks, to show that the blocks matter
    set.seed(20240601)
    pooled <- adonis2(d ~ groups, permutations = 999)
    blocked <- paste0(
      '"strata": ', str_vec(as.character(strata)), ', ',
      '"adonis2_p_unblocked": ', sprintf("%.17g", pooled$`Pr(>F)`[1]), ', '
    )
  }
  paste0(
    '"', name, '": {',
    '"method": "', method, '", ',
    '"n": ', nrow(x), ', ',
    '"distances": ', num(as.vector(d)), ', ',
    '"groups": ', str_vec(as.character(groups)), ', ',
    blocked,
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

# Case 3: blocked permutations (adonis2's strata): 36 objects in 6 blocks far apart (countries), two levels
# (3 + 3 per block) with a small shift; the blocks drown the shift unless permutations stay within them.
i3 <- 1:36
block3 <- (i3 - 1) %/% 6
level3 <- ((i3 - 1) %/% 3) %% 2
x3 <- sapply(1:4, function(j) 4 * ((block3 * (j + 2)) %% 7) + 0.35 * level3 + (((i3 * (5 * j + 3) + 7 * j * j) %% 17) / 17 - 0.5) * 2)
g3 <- factor(ifelse(level3 == 1, "warm", "cold"))
s3 <- factor(paste0("country", block3))

cat(
  "{", '"vegan_version": "', as.character(packageVersion("vegan")), '", ',
  '"permutations": 999, ',
  make_case("euclidean_three_groups", x1, g1, "euclidean"), ", ",
  make_case("braycurtis_two_groups", x2, g2, "bray"), ", ",
  make_case("euclidean_strata", x3, g3, "euclidean", strata = s3),
  "}\n",
  sep = "", file = out_path
)
