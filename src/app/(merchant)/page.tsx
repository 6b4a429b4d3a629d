import { Shop } from "~/client/components/shop";

export default function HomePage() {
  return <Shop />;
}
