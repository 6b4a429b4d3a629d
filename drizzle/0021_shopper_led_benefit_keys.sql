-- Keys led by the shopper (user_id), the future distribution column (docs/scale-out.md): the same rows are
-- unique, since a grant's or a redemption's user_id is its order's. In the migration's one transaction, so
-- there is no moment without the constraint.
CREATE UNIQUE INDEX "benefit_grant_user_order_type_uq" ON "benefit_grant" USING btree ("user_id","order_id","benefit_type");--> statement-breakpoint
CREATE UNIQUE INDEX "coupon_redemption_user_order_uq" ON "coupon_redemption" USING btree ("user_id","order_id");--> statement-breakpoint
DROP INDEX "benefit_grant_order_type_uq";--> statement-breakpoint
DROP INDEX "coupon_redemption_order_uq";
